"""Training the learned segmenter on a mix of plain and varied scenes, from given weights: a network
started from weights computes what they compute, batches draw the varied scenes at the share asked, and
the one command that makes a warm-started network makes its first stage too."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

from cbcl_pr_ros.perception.segmenter import CHANNELS, load_segmenter  # noqa: E402


def _written_weights(tmp_path: Path) -> Path:
    """Weights as the training script writes them (batch norms folded), of a network with statistics of
    its own so that folding them matters."""
    from train_segmenter import canonical_bytes, folded, make_net

    torch.manual_seed(1)
    net = make_net()
    with torch.no_grad():
        for bn in net.norms.values():
            bn.running_mean.uniform_(-0.2, 0.2)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.1, 0.1)
    net.eval()
    path = tmp_path / "init.safetensors"
    safetensors_numpy.save_file(folded(net), str(path), metadata={"channels": ",".join(CHANNELS)})
    path.write_bytes(canonical_bytes(path))
    return path


def test_a_network_started_from_written_weights_computes_what_they_compute(tmp_path):
    from train_segmenter import folded, make_net, warm_start

    path = _written_weights(tmp_path)
    rng = np.random.default_rng(0)
    sample = rng.normal(0, 1, (4, len(CHANNELS), 32, 48)).astype(np.float16)
    net = make_net()
    warm_start(net, path, sample)
    seg = load_segmenter(path)
    x = rng.normal(0, 1, (len(CHANNELS), 40, 56)).astype(np.float32)
    net.eval()
    with torch.no_grad():
        out = net(torch.from_numpy(x[None]))[0].numpy()
    np.testing.assert_allclose(out, seg.outputs(x), atol=1e-4)
    again = folded(net)  # folded back: the same weights
    for k, v in seg.weights.items():
        np.testing.assert_allclose(again[k], v, atol=1e-5)
    # in training mode each batch norm reads the batch's own statistics: on the sample it was set from,
    # what it computes is (nearly) the same
    net.train()
    with torch.no_grad():
        on_sample = net(torch.from_numpy(sample.astype(np.float32)))[0].numpy()
    net.eval()
    with torch.no_grad():
        ref = net(torch.from_numpy(sample.astype(np.float32)))[0].numpy()
    np.testing.assert_allclose(on_sample, ref, atol=1e-2)


def _fake_data(n: int, varied: bool) -> tuple:
    """Features, targets and scenes whose every pixel says which set it came from: the plain scenes'
    class target is background (0), the varied ones' inside (1)."""
    h, w = 24, 32
    feats = np.zeros((n, len(CHANNELS), h, w), np.float16)
    feats[:, CHANNELS.index("valid")] = 1.0
    tg = np.full((n, h, w), 1 if varied else 0, np.uint8)
    dist = np.zeros((n, h, w), np.float16)
    inst = np.full((n, h, w), 0 if varied else -1, np.int16)
    return feats, tg, dist, {"inst": inst}


def _args(tmp_path: Path, *extra: str) -> argparse.Namespace:
    from train_segmenter import parser

    return parser().parse_args(["--scenes", "20", "--val", "4", "--steps", "3", "--batch", "50", "--crop", "16", "24",
                                "--threads", "1", "--variety-scenes", "10", "--weights",
                                str(tmp_path / "out.safetensors"), *extra])


@pytest.mark.parametrize("share", [0.0, 0.3])
def test_batches_draw_the_varied_scenes_at_the_share_asked_and_validate_on_both(tmp_path, monkeypatch, share):
    import train_segmenter

    monkeypatch.setattr(train_segmenter, "build_data", lambda scenes, seed, variety=False: _fake_data(scenes, variety))
    seen = []
    real_loss = torch.nn.CrossEntropyLoss.forward

    def loss(self, out, target):  # every batch's targets: how many of its samples came from the varied set
        seen.append(float((target[:, 0, 0] == 1).float().mean()))
        return real_loss(self, out, target)

    monkeypatch.setattr(torch.nn.CrossEntropyLoss, "forward", loss)
    init = _written_weights(tmp_path)
    init.with_name("init_train_log.json").write_text(json.dumps({"weights_sha256": "first stage"}))
    path, log = train_segmenter.train(_args(tmp_path, "--variety-share", str(share), "--init", str(init)),
                                      tmp_path / "log.json")
    assert len(seen) == 3
    if share == 0:
        assert max(seen) == 0.0 and "validation_varied" not in log
    else:
        assert 0.1 < np.mean(seen) < 0.5
        assert log["validation_varied"]["scenes"] == 4
    assert log["validation"]["scenes"] == 4
    assert log["init"]["log"] == {"weights_sha256": "first stage"}
    assert json.loads((tmp_path / "log.json").read_text())["weights_sha256"] == log["weights_sha256"]
    load_segmenter(path)  # what it wrote, the loader takes
    assert path.read_bytes() != init.read_bytes()


def test_the_one_command_makes_the_first_stage_when_its_weights_are_missing(tmp_path, monkeypatch):
    import train_segmenter

    runs = []

    def fake_train(args, log_path):
        runs.append((args, log_path))
        if args.weights is not None:
            args.weights.write_bytes(b"w")
        return args.weights, {}

    monkeypatch.setattr(train_segmenter, "train", fake_train)
    monkeypatch.setenv("CBCL_BENCH_OUT", str(tmp_path / "bench"))
    init = tmp_path / "first.safetensors"
    argv = ["train_segmenter.py", "--init", str(init), "--make-init", "--variety-share", "0.25", "--steps", "3000",
            "--lr", "1e-3", "--threads", "1", "--seed", "4"]
    monkeypatch.setattr("sys.argv", argv)
    train_segmenter.main()
    assert len(runs) == 2
    (first, first_log), (second, _) = runs
    defaults = train_segmenter.parser().parse_args([])
    # the first stage: the defaults from noise (plain scenes), the seed as given, its own threads
    assert first.weights == init and first_log == tmp_path / "first_train_log.json"
    assert (first.steps, first.lr, first.variety_share, first.init, first.threads, first.seed) == \
        (defaults.steps, defaults.lr, 0.0, None, defaults.init_threads, 4)
    assert (second.init, second.steps, second.variety_share, second.threads) == (init, 3000, 0.25, 1)
    # made once: a second run starts from it
    runs.clear()
    train_segmenter.main()
    assert [a.init for a, _ in runs] == [init]


@pytest.mark.parametrize("argv", [["--variety-share", "1.5"], ["--variety-share", "-0.1"],
                                  ["--variety", "--variety-share", "0.2"], ["--make-init"],
                                  ["--init", "/nonexistent/first.safetensors"]])
def test_bad_training_options_are_refused_before_anything_runs(monkeypatch, argv):
    import train_segmenter

    monkeypatch.setattr(train_segmenter, "train", lambda *a: pytest.fail("trained on bad options"))
    monkeypatch.setattr("sys.argv", ["train_segmenter.py", *argv])
    with pytest.raises(SystemExit):
        train_segmenter.main()
