"""Evaluation layer: data sets, incremental protocols, compared methods, metrics, reports, CLI.

Everything runs on cached frozen features (``featureset``), so every method sees the same vectors.
"""
from .experiments import EXPERIMENTS, Experiment
from .featureset import FeatureSet, extract_feature_set, synthetic_feature_set
from .metrics import average_incremental_accuracy, forgetting, top1
from .protocols import Schedule, Step, base_sessions, class_incremental, few_shot_incremental
from .runner import RunResult, run_schedule

__all__ = ["EXPERIMENTS", "Experiment", "FeatureSet", "extract_feature_set", "synthetic_feature_set",
           "average_incremental_accuracy", "forgetting", "top1", "Schedule", "Step", "base_sessions",
           "class_incremental", "few_shot_incremental", "RunResult", "run_schedule"]
