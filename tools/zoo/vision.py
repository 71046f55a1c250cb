"""The image models: an MLP on flattened images, a small conv net, and torchvision's ResNets
(full width, or narrowed for --tiny). Each is a classifier trained with cross-entropy."""

from __future__ import annotations

from typing import Callable

from .common import Built, Sizes, _torch, data_generator


def classifier_loss_wrap(model):
    """The training step of a classifier: the cross-entropy of its logits."""
    torch = _torch()

    class ClassifierTrainStep(torch.nn.Module):
        """forward(x, target) -> (cross_entropy(model(x), target),)"""

        def __init__(self, m):
            super().__init__()
            self.model = m

        def forward(self, x, target):
            return (torch.nn.functional.cross_entropy(self.model(x), target),)

    return ClassifierTrainStep(model)


def identity(model):
    return model


def _image_inputs(sizes: Sizes, channels: int, num_classes: int):
    torch = _torch()
    g = data_generator()
    x = torch.randn(sizes.batch, channels, sizes.image_size, sizes.image_size, generator=g)
    y = torch.randint(0, num_classes, (sizes.batch,), generator=g)
    return x, y


def build_mlp(sizes: Sizes) -> Built:
    torch = _torch()
    nn = torch.nn
    in_features = sizes.image_size * sizes.image_size
    hidden = 64 if sizes.tiny else 512
    num_classes = 10
    model = nn.Sequential(
        nn.Flatten(),
        nn.Linear(in_features, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, num_classes),
    )
    x, y = _image_inputs(sizes, 1, num_classes)
    return Built(
        model,
        (x,),
        (x, y),
        identity,
        classifier_loss_wrap,
        {"in_features": in_features, "hidden": hidden, "num_classes": num_classes},
    )


def build_cnn(sizes: Sizes) -> Built:
    torch = _torch()
    nn = torch.nn
    c1, c2 = (8, 16) if sizes.tiny else (32, 64)
    num_classes = 10

    class SmallCNN(nn.Module):
        """conv-BN-ReLU, conv-BN-ReLU, max-pool, global average pool, linear."""

        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, c1, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(c1)
            self.conv2 = nn.Conv2d(c1, c2, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(c2)
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(c2, num_classes)

        def forward(self, x):
            x = torch.relu(self.bn1(self.conv1(x)))
            x = self.pool(torch.relu(self.bn2(self.conv2(x))))
            x = torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1)
            return self.fc(x)

    x, y = _image_inputs(sizes, 3, num_classes)
    return Built(
        SmallCNN(),
        (x,),
        (x, y),
        identity,
        classifier_loss_wrap,
        {"channels": [c1, c2], "num_classes": num_classes},
    )


# torchvision's block type and blocks per stage for each depth.
_RESNET_LAYOUT = {
    "resnet18": ("BasicBlock", [2, 2, 2, 2]),
    "resnet50": ("Bottleneck", [3, 4, 6, 3]),
    "resnet152": ("Bottleneck", [3, 8, 36, 3]),
}
_TINY_RESNET_WIDTH = 8  # torchvision's is 64


def _narrow_resnet(name: str, width: int, num_classes: int):
    """torchvision's ResNet with stage widths width, 2*width, 4*width, 8*width.

    Same depth, blocks, module names and initialisation as ``torchvision.models.<name>``;
    only the channel counts shrink (64 -> ``width``), which keeps the graph's structure
    and node count while making the --tiny weights about (64/width)^2 times smaller.
    """
    import torch.nn as nn
    from torchvision.models import resnet as tv

    block_name, layers = _RESNET_LAYOUT[name]
    block = getattr(tv, block_name)

    class NarrowResNet(tv.ResNet):
        def __init__(self):
            nn.Module.__init__(self)
            self._norm_layer = nn.BatchNorm2d
            self.inplanes = width
            self.dilation = 1
            self.groups = 1
            self.base_width = 64
            self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.layer1 = self._make_layer(block, width, layers[0])
            self.layer2 = self._make_layer(block, 2 * width, layers[1], stride=2)
            self.layer3 = self._make_layer(block, 4 * width, layers[2], stride=2)
            self.layer4 = self._make_layer(block, 8 * width, layers[3], stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(8 * width * block.expansion, num_classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)

    return NarrowResNet()


def resnet_builder(name: str) -> Callable[[Sizes], Built]:
    """The builder of torchvision's ``name`` (a key of ``_RESNET_LAYOUT``): random init,
    1000 classes at full size; --tiny: width 8, 10 classes."""

    def build(sizes: Sizes) -> Built:
        import torchvision

        if sizes.tiny:
            num_classes = 10
            model = _narrow_resnet(name, _TINY_RESNET_WIDTH, num_classes)
            config = {"torchvision": name, "weights": None, "num_classes": num_classes,
                      "base_width": _TINY_RESNET_WIDTH}
        else:
            num_classes = 1000
            model = getattr(torchvision.models, name)(weights=None, num_classes=num_classes)
            config = {"torchvision": name, "weights": None, "num_classes": num_classes,
                      "base_width": 64}
        x, y = _image_inputs(sizes, 3, num_classes)
        return Built(model, (x,), (x, y), identity, classifier_loss_wrap, config)

    return build
