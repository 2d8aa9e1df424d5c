"""Features layer: frozen pretrained backbones, the one preprocessing path, a feature cache.

No ROS import here: image messages are decoded from their fields, so the same code serves the
nodes, the bag tools and the evaluation.
"""

from .backbones import PRECISIONS, Backbone, available_backbones, make_backbone, resolve_weights, select_runtime
from .cache import FeatureCache
from .prefetch import extract_prefetched
from .preprocessing import (
    SUPPORTED_ENCODINGS,
    compressed_to_rgb,
    image_to_rgb,
    load_image_file,
    rgb_to_image_fields,
)
from .weights import WeightsMismatchError, WeightsNotFoundError

__all__ = [
    "Backbone",
    "FeatureCache",
    "PRECISIONS",
    "SUPPORTED_ENCODINGS",
    "WeightsMismatchError",
    "WeightsNotFoundError",
    "available_backbones",
    "compressed_to_rgb",
    "extract_prefetched",
    "image_to_rgb",
    "load_image_file",
    "make_backbone",
    "resolve_weights",
    "rgb_to_image_fields",
    "select_runtime",
]
