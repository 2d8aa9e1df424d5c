"""Feature cache, report files and a CLI smoke run on synthetic features."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from cbcl_pr_ros.cli.evaluate import main
from cbcl_pr_ros.evaluation.datasets import ArrayImages, ImageDataset
from cbcl_pr_ros.evaluation.featureset import FeatureSet, extract_feature_set, subsample_per_class


class CountingBackbone:
    name, feature_dim, preprocessing_id, weights_sha256, runtime = "fake", 3, "fake-prep", "0", "numpy"

    def __init__(self):
        self.calls = 0

    def extract(self, images):
        self.calls += 1
        return np.stack([im.reshape(-1, 3).mean(0) for im in images]).astype(np.float32)


def test_subsample_per_class():
    y = np.repeat(np.arange(3), [5, 2, 9])
    idx = subsample_per_class(y, 3, 0)
    assert np.bincount(y[idx]).tolist() == [3, 2, 3]
    assert np.array_equal(idx, subsample_per_class(y, 3, 0))


def test_feature_cache_hit(tmp_path, rng):
    imgs = rng.integers(0, 256, (20, 4, 4, 3), dtype=np.uint8)
    y = np.arange(20) % 2
    ds = ImageDataset("toy", ("a", "b"), ArrayImages(imgs), y, ArrayImages(imgs[:6]), y[:6])
    bb = CountingBackbone()
    fs = extract_feature_set(ds, bb, tmp_path, train_per_class=4)
    calls = bb.calls
    fs2 = extract_feature_set(ds, bb, tmp_path, train_per_class=4)
    assert bb.calls == calls  # served from the cache
    assert np.array_equal(fs.train_x, fs2.train_x) and fs2.meta["backbone"] == "fake"
    assert np.bincount(fs.train_y).tolist() == [4, 4] and len(fs.test_y) == 6
    assert np.allclose(fs.train_x[0], imgs[int(fs.train_refs[0])].reshape(-1, 3).mean(0))
    assert len(list(tmp_path.glob("fake-*.npy"))) == 2  # train and test entries in the features layer's cache
    path = tmp_path / "fs.npz"
    fs.save(path)
    assert np.array_equal(FeatureSet.load(path).test_x, fs.test_x)


def test_cli_fsil_smoke_writes_json_csv_md_png(tmp_path):
    rc = main(["--synthetic", "--seeds", "2", "--fast", "--out", str(tmp_path), "--methods", "cbcl-pr,ncm,slda",
               "fsil-table", "--shots", "5", "--ways", "5"])
    assert rc == 0
    d = tmp_path / "eval_fsil-table_synthetic"
    data = json.loads((d / "fsil-table.json").read_text())
    assert len(data["runs"]) == 3 * 2 and data["seeds"] == [0, 1]
    run = data["runs"][0]
    assert len(run["accuracy"]) == 2 and run["n_classes"] == [5, 10]
    assert 0.0 <= run["final_accuracy"] <= 1.0
    rows = list(csv.DictReader(open(d / "fsil-table.csv")))
    assert {r["method"] for r in rows} == {"cbcl-pr", "ncm", "slda"}
    md = (d / "fsil-table.md").read_text()
    assert "synthetic" in md and "seeds 2" in md and "| NCM |" in md
    assert (d / "fsil-table.png").stat().st_size > 1000


@pytest.mark.slow
def test_cli_all_writes_results_doc(tmp_path):
    doc = tmp_path / "results.md"
    rc = main(["--synthetic", "--seeds", "1", "--fast", "--out", str(tmp_path), "--docs", str(doc),
               "--methods", "cbcl-pr-default,ncm", "all"])
    assert rc == 0
    text = doc.read_text()
    for name in ("fsil-table", "sota", "ablation", "memory-budget", "curves", "prediction-time", "d-sweep"):
        assert f"## {name} — synthetic" in text
        assert (tmp_path / f"eval_{name}_synthetic" / f"{name}.png").is_file()
    assert "## Answers" in text and "D sweep" in text and "paired by seed" in text


def test_cli_rejects_unknown_method(capsys):
    with pytest.raises(SystemExit):
        main(["--synthetic", "--methods", "nope", "fsil-table"])


def test_cli_reuse_skips_a_matching_stored_run(tmp_path, capsys):
    argv = ["--synthetic", "--seeds", "1", "--fast", "--out", str(tmp_path), "--methods", "ncm", "--reuse",
            "fsil-table", "--shots", "5", "--ways", "5"]
    assert main(argv) == 0
    first = json.loads((tmp_path / "eval_fsil-table_synthetic" / "fsil-table.json").read_text())
    capsys.readouterr()
    assert main(argv) == 0
    assert "reused" in capsys.readouterr().out
    again = json.loads((tmp_path / "eval_fsil-table_synthetic" / "fsil-table.json").read_text())
    assert again["runs"] == first["runs"]
    argv[2] = "2"  # other seeds: must rerun
    assert main(argv) == 0
    assert "reused" not in capsys.readouterr().out


def test_answers_state_the_measured_differences():
    from cbcl_pr_ros.evaluation.experiments import Experiment
    from cbcl_pr_ros.evaluation.results_doc import answers
    from cbcl_pr_ros.evaluation.runner import RunResult

    def run(method, acc):
        return RunResult(method, "fsil", 0, accuracy=[acc, acc], n_classes=[2, 4], teach_seconds=[0.1, 0.1],
                         predict_ms_per_image=[0.01, 0.01], memory_bytes=[10, 20], n_clusters=[2, 4],
                         info={"shots": 5, "ways": 2})

    exp = Experiment("fsil-table", "toy", "fake", [0], [run("cbcl-pr-default", 0.70), run("cbcl-pr", 0.68),
                                                       run("cbcl", 0.65), run("ncm", 0.72), run("cbcl-pr-diag", 0.67)])
    text = "\n".join(answers([exp]))
    # default minus the paper's head, CBCL and NCM (only methods that ran get a column), then diag - full
    assert "| 5 | 2 | 70.0 ± 0.0 | +2.0 ± 0.0 | +5.0 ± 0.0 | -2.0 ± 0.0 | -1.0 ± 0.0 |" in text
    assert "1/1 settings against cbcl-pr, 1/1 settings against cbcl, 0/1 settings against ncm" in text


def test_cli_reuse_runs_only_missing_methods(tmp_path, capsys):
    base = ["--synthetic", "--seeds", "1", "--fast", "--out", str(tmp_path), "--reuse"]
    tail = ["fsil-table", "--shots", "5", "--ways", "5"]
    assert main(base + ["--methods", "ncm"] + tail) == 0
    assert main(base + ["--methods", "ncm,slda"] + tail) == 0
    assert "reused" in capsys.readouterr().out
    data = json.loads((tmp_path / "eval_fsil-table_synthetic" / "fsil-table.json").read_text())
    assert sorted({r["method"] for r in data["runs"]}) == ["ncm", "slda"] and len(data["runs"]) == 2
    assert any("added to a stored run" in n for n in data["notes"])


def test_report_rebuilds_the_doc_from_stored_runs(tmp_path):
    out, doc = tmp_path / "out", tmp_path / "results.md"
    assert main(["--synthetic", "--seeds", "1", "--fast", "--out", str(out), "--methods", "ncm,fecam",
                 "fsil-table", "--shots", "1", "--ways", "5"]) == 0
    old = out / "eval_sota_synthetic"
    old.mkdir()
    stored = json.loads((out / "eval_fsil-table_synthetic" / "fsil-table.json").read_text())
    stored.update(name="sota", params={k: v for k, v in stored["params"].items() if k != "pipeline"})
    (old / "sota.json").write_text(json.dumps(stored))  # as written before the pipeline marker existed
    assert main(["--out", str(out), "--docs", str(doc), "report"]) == 0
    text = doc.read_text()
    assert "## fsil-table — synthetic" in text and "## sota — synthetic" in text
    assert text.count("stored by an earlier version") == 1
    assert main(["--out", str(tmp_path / "empty"), "--docs", str(doc), "report"]) == 1


def test_cli_refresh_reruns_only_the_named_methods(tmp_path):
    """--reuse --refresh M drops M's stored runs and reruns them, keeping the others; a run stored by a
    pipeline version whose change touched only M becomes the current version."""
    from cbcl_pr_ros.evaluation.experiments import PIPELINE, PIPELINE_AFFECTED

    old_version, affected = next(iter(PIPELINE_AFFECTED.items()))
    refreshed = sorted(affected)[0]
    argv = ["--synthetic", "--seeds", "1", "--fast", "--out", str(tmp_path), "--methods", f"{refreshed},ncm",
            "fsil-table", "--shots", "5", "--ways", "5"]
    assert main(argv) == 0
    path = tmp_path / "eval_fsil-table_synthetic" / "fsil-table.json"
    data = json.loads(path.read_text())
    data["params"]["pipeline"] = old_version
    for r in data["runs"]:
        r["accuracy"] = [-1.0] * len(r["accuracy"])  # marks the stored runs
    path.write_text(json.dumps(data))
    assert main(["--reuse", "--refresh", refreshed, "--note", "why", *argv]) == 0
    new = json.loads(path.read_text())
    by = {r["method"]: r for r in new["runs"]}
    assert by["ncm"]["accuracy"][0] == -1.0  # kept
    assert by[refreshed]["accuracy"][0] >= 0.0  # rerun
    assert new["params"]["pipeline"] == PIPELINE and "why" in new["notes"] and new["params"]["note"] == ["why"]
    assert main(["--reuse", *argv]) == 0  # nothing refreshed: everything kept
    assert json.loads(path.read_text())["runs"][0]["accuracy"] == new["runs"][0]["accuracy"]
