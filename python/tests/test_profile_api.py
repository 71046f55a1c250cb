"""graph_opt.profile: a user's model profiled in three lines (python/graph_opt/model_profile.py)."""
import warnings

import pytest
import torch
import torch.nn.functional as F

import graph_opt

warnings.filterwarnings("ignore", category=FutureWarning)


class TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Linear(12, 24)
        self.head = torch.nn.Linear(24, 3)

    def forward(self, x):
        return self.head(torch.relu(self.encoder(x)))


def test_profile_returns_time_by_module_and_writes_the_html_report(tmp_path):
    torch.manual_seed(0)
    html = tmp_path / "out" / "report.html"
    report = graph_opt.profile(TwoLayers(), (torch.randn(8, 12), torch.randint(0, 3, (8,))),
                               loss_fn=F.cross_entropy, html=html, runs=2)
    assert report.step_time_s > 0 and report.peak_bytes > 0
    modules = {r["module"]: r for r in report.modules}
    # The model's own submodules, each with forward and backward time of its nodes.
    for name in ("encoder", "head"):
        assert modules[name]["forward_s"] > 0 and modules[name]["backward_s"] > 0, modules
    assert sum(r["nodes"] for r in report.modules) == len(report.nodes)
    assert abs(sum(r["share"] for r in report.modules) - 1) < 1e-9
    assert "encoder" in str(report) and str(html) in str(report)
    assert html.is_file() and "Time by module" in html.read_text()


def test_profile_without_loss_fn_takes_the_models_own_loss():
    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 1)

        def forward(self, x, y):
            return F.mse_loss(self.lin(x).squeeze(1), y)

    report = graph_opt.profile(WithLoss(), (torch.randn(5, 4), torch.randn(5)), runs=1)
    assert any(r["module"] == "lin" for r in report.modules) and report.html is None


def test_profile_of_something_not_a_model_is_a_graph_opt_error():
    with pytest.raises(graph_opt.Error, match="not an nn.Module"):
        graph_opt.profile(lambda x: x, (torch.randn(2),))
