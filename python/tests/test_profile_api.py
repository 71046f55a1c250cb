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
                               loss_fn=lambda m, x, y: F.cross_entropy(m(x), y),
                               html=html, runs=2)
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


def test_one_loss_fn_convention_and_a_clear_refusal_of_the_old_one():
    """profile calls loss_fn(model, *inputs), as auto_checkpoint and export_training_step
    do; a loss of the model's output (F.cross_entropy, nn.CrossEntropyLoss()) is refused
    with the lambda to write instead, and labels loss_fn closes over are lifted."""
    torch.manual_seed(0)
    x, y = torch.randn(8, 12), torch.randint(0, 3, (8,))
    for old in (F.cross_entropy, torch.nn.CrossEntropyLoss()):
        with pytest.raises(graph_opt.Error, match=r"loss_fn is called as loss_fn\(model, "
                                                  r"\*inputs\).*lambda model, x, y"):
            graph_opt.profile(TwoLayers(), (x, y), loss_fn=old, runs=1)
    report = graph_opt.profile(TwoLayers(), (x,), loss_fn=lambda m, x: F.cross_entropy(m(x), y),
                               runs=1)
    assert {"encoder", "head"} <= {r["module"] for r in report.modules}


def test_a_hugging_face_classifier_in_three_lines():
    """A Hugging Face classifier and its batch as a dict with labels: no loss_fn, no
    wrapper module (its output's .loss is the loss); the table names modules in full."""
    import transformers
    config = transformers.DistilBertConfig(vocab_size=64, dim=16, hidden_dim=32, n_layers=1,
                                           n_heads=2, max_position_embeddings=16,
                                           num_labels=2)
    torch.manual_seed(0)
    model = transformers.DistilBertForSequenceClassification(config)
    batch = {"input_ids": torch.randint(0, 64, (2, 8)), "attention_mask": torch.ones(2, 8,
                                                                                     dtype=torch.long),
             "labels": torch.tensor([0, 1])}
    report = graph_opt.profile(model, batch, runs=1)
    names = [r["module"] for r in report.modules]
    assert "distilbert.transformer.layer.0.ffn.lin1" in names, names
    # The whole table: str(report) shows the 15 slowest, and which those are is timing.
    table = report.table(top=len(report.modules))
    assert "distilbert.transformer.layer.0.ffn.lin1" in table
    assert "distilbert.transformer.layer.0.ffn.lin2" in table
    with pytest.raises(graph_opt.Error, match="not a scalar loss"):
        graph_opt.profile(model, {k: v for k, v in batch.items() if k != "labels"}, runs=1)


def test_the_html_reports_plots_name_nodes_by_operator_and_module():
    """The plots label the slowest nodes and the peak as the summary does ("mm · head"),
    never by the IR value a node defines (getitem_123)."""
    import json
    import os
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.text import Text
    from graph_opt.model_profile import _report_tables
    report = _report_tables()
    sample = os.path.join(os.path.dirname(__file__), "..", "..", "test", "Inputs",
                          "profile-sample", "profile.json")
    with open(sample) as f:
        profile = json.load(f)
    peak = next(n for n in profile["nodes"] if n["rank"] == profile["peak_rank"])
    for draw in (report.plot_memory, report.plot_node_times, report.plot_breakdown):
        fig = draw(plt, profile, None)
        texts = " ".join(t.get_text() for t in fig.findobj(Text))
        plt.close(fig)
        named = [n["node_name"] for n in profile["nodes"]
                 if n["node_name"] != report.node_title(n, with_module=False)]
        assert not set(named) & set(texts.split()), texts
        if draw is not report.plot_node_times:
            assert report.node_title(peak) in texts, texts
