"""TeachClass without ROS (issue 23): the Teacher's plan from request to committed examples.

A fake port stands in for the learner node: it extracts vectors from the images' mean colour,
hands out prepared stream frames and commits straight into a RAM-only controller, so every source
(vectors, images, camera frames, object frames, a track) and every refusal is checked here with no
ROS graph.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.objects.frame import ObjectFrame
from cbcl_pr_ros.objects.stream import ObjectStream
from cbcl_pr_ros.perception import Proposal
from cbcl_pr_ros.service.controller import LearnerController, TeachOutcome
from cbcl_pr_ros.service.teaching import (
    FeatureSourceError,
    TeachRequest,
    TeachSettings,
    Teacher,
)
from cbcl_pr_ros.request_checks import RequestLimits, decode_request_images

D = 8
NAN3 = np.full(3, np.nan)


def _vector(rgb: np.ndarray) -> np.ndarray:
    """A stand-in backbone: the image's mean colour, spread over D values."""
    m = rgb.reshape(-1, 3).mean(0) / 255.0
    return np.concatenate([m, m, m[:2]]).astype(np.float32)


@dataclass
class FakePort:
    settings: TeachSettings = field(default_factory=TeachSettings)
    frames: dict[str, list[Any]] = field(default_factory=dict)
    clock: float = 100.0
    extract_batches: list[int] = field(default_factory=list)
    collected: list[tuple[int, float, str]] = field(default_factory=list)
    commits: list[tuple[str, str, tuple[int, ...], Any]] = field(default_factory=list)
    fail_extract: bool = False
    last_feats: np.ndarray | None = None
    last_negatives: np.ndarray | None = None

    def teach_settings(self) -> TeachSettings:
        return self.settings

    def extract(self, rgbs: list[np.ndarray]) -> np.ndarray:
        if self.fail_extract:
            raise FeatureSourceError("feature extractor did not answer within 1.0 s")
        self.extract_batches.append(len(rgbs))
        return np.stack([_vector(x) for x in rgbs])

    def collect(self, n: int, timeout_s: float, stream: str) -> list[Any]:
        self.collected.append((n, timeout_s, stream))
        return list(self.frames.get(stream, []))[:n]

    def now_s(self) -> float:
        return self.clock

    def topic(self, stream: str) -> str:
        return f"/{stream}"

    def commit(self, c: LearnerController, label: str, feats: np.ndarray, source: str, views: Any,
               negatives: np.ndarray | None = None) -> TeachOutcome:
        self.commits.append((label, source, feats.shape, None if views is None else views.shape))
        self.last_feats = feats
        self.last_negatives = negatives
        return c.teach(label, feats, source, views, negatives=negatives)


def _controller() -> LearnerController:
    return LearnerController(lambda d: CBCLPRLearner(LearnerConfig(seed=0), backbone="synthetic", feature_dim=d),
                             "synthetic", D)


def _teacher(port: FakePort, limits: RequestLimits | None = None) -> tuple[Teacher, ObjectStream]:
    objects = ObjectStream(window=5, max_missed=3, max_distance_m=0.1)
    return Teacher(port, objects, "synthetic", limits or RequestLimits()), objects


def _image(rgb: np.ndarray) -> SimpleNamespace:
    """An object with sensor_msgs/Image's fields (what the node passes on unchanged)."""
    h, w = rgb.shape[:2]
    return SimpleNamespace(encoding="rgb8", height=h, width=w, step=3 * w, data=rgb.tobytes(), is_bigendian=0)


def _vector_msg(v: np.ndarray, backbone: str = "synthetic") -> SimpleNamespace:
    return SimpleNamespace(backbone=backbone, dimension=v.size, values=v.astype(np.float32).tolist())


def _scene(colour: tuple[int, int, int], box: tuple[int, int, int, int] = (20, 20, 44, 44)) -> np.ndarray:
    """A grey 64x64 image with one coloured square (an object RGB proposals find)."""
    rgb = np.full((64, 64, 3), 128, np.uint8)
    x0, y0, x1, y1 = box
    rgb[y0:y1, x0:x1] = colour
    return rgb


def _object_frame(boxes: list[tuple[int, int, int, int]], rows: np.ndarray, shape=(480, 640)) -> ObjectFrame:
    props = [Proposal(b, None, np.array([0.1 * i, 0.0, 0.8]), np.array([0.05] * 3), 0.9) for i, b in enumerate(boxes)]
    return ObjectFrame(props, rows.astype(np.float32), shape)


def test_feature_vectors_are_learned_whole():
    port = FakePort()
    teacher, _ = _teacher(port)
    c = _controller()
    v = np.linspace(0.1, 0.8, D)
    out = teacher.teach(c, TeachRequest(label=" mug", features=(_vector_msg(v), _vector_msg(v + 0.01))))
    assert out.success, out.message
    assert port.commits == [("mug", "feature vectors", (2, D), None)]
    assert c.classes == ["mug"]


@pytest.mark.parametrize("request_, reason", [
    (TeachRequest(label=""), "empty label"),
    (TeachRequest(label="mug", mode=7), "mode 7"),
    (TeachRequest(label="mug", track_id=3, rois=((0, 0, 4, 4),)), "either track_id or rois"),
    (TeachRequest(label="mug", features=(_vector_msg(np.ones(D), "other"),)), "backbone 'other'"),
    (TeachRequest(label="mug", features=(_vector_msg(np.ones(D + 1)),)), "does not match"),
    (TeachRequest(label="mug", images=(SimpleNamespace(encoding="rgb8", height=4, width=4, step=12,
                                                       data=b"\0" * 10, is_bigendian=0),)), "image 0"),
    (TeachRequest(label="mug", num_frames=10 ** 6), "num_frames"),
    (TeachRequest(label="mug", track_id=5), "track 5 does not exist"),
])
def test_refusals_say_why_and_change_nothing(request_, reason):
    port = FakePort()
    teacher, _ = _teacher(port)
    c = _controller()
    out = teacher.teach(c, request_)
    assert not out.success and out.message.startswith("nothing learned:") and reason in out.message, out.message
    assert port.commits == [] and c.classes == []


def test_request_images_with_teach_views_go_in_chunks_the_source_accepts():
    port = FakePort(settings=TeachSettings(views=3, view_spread=0.5, seed=1))
    teacher, _ = _teacher(port, RequestLimits(max_images_per_request=4))
    c = _controller()
    images = tuple(_image(_scene((200, 30 * i, 40))) for i in range(3))
    out = teacher.teach(c, TeachRequest(label="cup", images=images, mode=2))  # MODE_FRAME: whole images
    assert out.success, out.message
    assert port.extract_batches == [4, 4, 4]  # 3 images + 3 x 3 views = 12, at most 4 per call
    label, source, shape, views = port.commits[0]
    assert (label, shape, views) == ("cup", (3, D), (3, 3, D))
    assert source == "images + 3 views each"


def test_request_images_teach_the_object_in_view_or_the_given_box():
    port = FakePort()
    teacher, _ = _teacher(port)
    rgb = _scene((220, 40, 40))
    out = teacher.teach(_controller(), TeachRequest(label="red", images=(_image(rgb),), mode=1))  # MODE_OBJECT
    assert out.success, out.message
    assert "crops of the object in view" in port.commits[-1][1]
    out = teacher.teach(_controller(), TeachRequest(label="red", images=(_image(rgb),), rois=((20, 20, 24, 24),)))
    assert out.success and "crops of the given boxes" in port.commits[-1][1]
    out = teacher.teach(_controller(), TeachRequest(label="red", images=(_image(rgb),), rois=((50, 50, 30, 30),)))
    assert not out.success and "outside the 64x64 image 0" in out.message


def test_camera_frames_and_their_timeout():
    port = FakePort(settings=TeachSettings(num_frames=3, timeout_s=2.0, max_timeout_s=5.0))
    teacher, _ = _teacher(port)
    c = _controller()
    out = teacher.teach(c, TeachRequest(label="mug", timeout_s=99.0))
    assert not out.success and "above the cap of 5 s" in out.message and port.collected == []
    out = teacher.teach(c, TeachRequest(label="mug", timeout_s=4.0))
    assert not out.success and out.message.startswith("no camera frames arrived within 4.0 s on '/features'")
    assert port.collected == [(3, 4.0, "features")]
    port.frames["features"] = [_vector_msg(np.full(D, 0.3))] * 2
    out = teacher.teach(c, TeachRequest(label="mug"))
    assert out.success and port.commits[-1][1] == "camera frames (of 3 asked; timed out)"


def test_object_frames_teach_the_object_in_view_or_inside_the_box():
    port = FakePort(settings=TeachSettings(teach_from="object", num_frames=2))
    teacher, objects = _teacher(port)
    rows = np.stack([np.full(D, 0.2), np.full(D, 0.9)])
    frame = _object_frame([(0, 0, 60, 60), (250, 180, 390, 300)], rows)  # a corner object and a central one
    port.frames["objects"] = [frame, frame]
    objects.arrived(frame, port.clock)
    c = _controller()
    out = teacher.teach(c, TeachRequest(label="central"))
    # two frames of a still camera: one view, one shot (one_shot_per_view)
    assert out.success and port.commits[-1][1:3] == (
        "object crop of camera frames, 2 frames as 1 view; the object at (250, 180)-(390, 300)", (1, D))
    assert (out.taught_track_id, out.taught_box) == (-1, (250, 180, 390, 300))  # no track yet: the box
    assert np.allclose(port.last_feats, 0.9)  # the central object's vectors
    out = teacher.teach(c, TeachRequest(label="corner", rois=((0, 0, 60, 60),)))
    assert out.success and port.commits[-1][1] == ("object crop of camera frames inside the box, 2 frames as 1 view; "
                                                   "the object at (0, 0)-(60, 60)")
    assert np.allclose(port.last_feats, 0.2)  # the box chose the corner object's vectors
    out = teacher.teach(c, TeachRequest(label="x", rois=((600, 0, 100, 10),)))
    assert not out.success and "outside the 640x480 camera image" in out.message
    assert port.collected[-1][2] == "objects" and len(port.collected) == 2  # refused before any wait


def test_a_box_teach_skips_an_object_frame_of_another_size():
    """Anyone may publish object frames: one of another size (here 0x0 and a small one) among them is a
    frame without the box, not a reason to refuse the teach; when no frame holds the box, the answer
    says why."""
    port = FakePort(settings=TeachSettings(teach_from="object", num_frames=3))
    teacher, objects = _teacher(port)
    good = _object_frame([(0, 0, 60, 60)], np.full((1, D), 0.2))
    empty, small = _object_frame([], np.zeros((0, D)), shape=(0, 0)), _object_frame([], np.zeros((0, D)), shape=(40, 40))
    objects.arrived(good, port.clock)
    port.frames["objects"] = [good, empty, small]
    c = _controller()
    out = teacher.teach(c, TeachRequest(label="corner", rois=((0, 0, 60, 60),)))
    assert out.success, out.message
    assert "(2 of 3 frames had none)" in port.commits[-1][1] and np.allclose(port.last_feats, 0.2)
    port.frames["objects"] = [small, empty]
    out = teacher.teach(c, TeachRequest(label="other", rois=((0, 0, 60, 60),)))
    assert not out.success
    assert "no object found inside the box in any of the 2 camera frames" in out.message
    assert "lies outside the" in out.message and c.classes == ["corner"]


def test_the_object_in_view_is_the_object_detections_show_its_recognised_pieces_together():
    """Pieces the learner joins into one object (its union nearer the taught class than the larger piece
    alone) are one object to teach too: the union's vector is learned, and no piece of it becomes a
    negative of the class it belongs to."""
    from cbcl_pr_ros.objects.frame import ObjectJoins
    from cbcl_pr_ros.objects.pieces import union_proposal

    rng = np.random.default_rng(2)
    c = _controller()
    assert c.teach("duck", rng.normal(3, 0.2, (8, D)).astype(np.float32)).success
    assert c.teach("box", rng.normal(-3, 0.2, (8, D)).astype(np.float32)).success
    head, beak, whole = np.full(D, 3.0), np.full(D, 3.0), np.full(D, 3.0)
    head[: D // 2] += 0.6  # the head alone is a poorer duck than the whole
    beak[D // 2:] -= 4.0  # the beak alone is no duck
    big = Proposal((250, 180, 390, 300), None, np.array([0.0, 0.0, 0.8]), np.array([0.08] * 3), 0.9)
    small = Proposal((390, 220, 420, 250), None, np.array([0.06, 0.0, 0.8]), np.array([0.03] * 3), 0.9)
    joins = ObjectJoins(((0, 1),), (union_proposal(big, small),), whole.astype(np.float32).reshape(1, D))
    frame = ObjectFrame([big, small], np.stack([head, beak]).astype(np.float32), (480, 640), joins)
    port = FakePort(settings=TeachSettings(teach_from="object", num_frames=1))
    teacher, objects = _teacher(port)
    port.frames["objects"] = [frame]
    objects.arrived(frame, port.clock)
    shown = objects.classify_and_track(frame, c, 1.0)[1]
    assert [t.proposal.box for t in shown] == [(250, 180, 420, 300)]  # what detections show: one duck
    out = teacher.teach(c, TeachRequest(label="duck"))
    assert out.success and out.taught_box == (250, 180, 420, 300), out.message
    assert np.allclose(port.last_feats, whole) and port.last_negatives is None
    assert out.taught_track_id == shown[0].id and "the object at (250, 180)-(420, 300)" in port.commits[-1][1]


def test_the_other_objects_of_teaching_frames_become_negatives_unless_taught():
    """Issue 20: the other objects of a teaching frame are natural negatives for the open-set gate; one
    the memory already knows (a taught class standing beside the new object) is not one."""
    rng = np.random.default_rng(0)
    cup, other, new = (rng.normal(0.0, 1.0, D) for _ in range(3))
    c = _controller()
    assert c.teach("cup", (cup + rng.normal(0.0, 0.05, (3, D))).astype(np.float32)).success
    port = FakePort(settings=TeachSettings(teach_from="object", num_frames=2))
    teacher, objects = _teacher(port)
    rows = np.stack([cup + 0.01, other, new])
    frame = _object_frame([(0, 0, 60, 60), (500, 0, 600, 60), (250, 180, 390, 300)], rows)  # new one central
    port.frames["objects"] = [frame, frame]
    objects.arrived(frame, port.clock)
    out = teacher.teach(c, TeachRequest(label="new"))
    assert out.success and np.allclose(port.last_feats, new)
    assert port.last_negatives.shape == (4, D)  # two frames, two other objects each
    store = c.learner_.negatives_
    # the cup-like one was answered "cup": not kept; the other object of the two still frames is one
    # object, kept (and counted) once
    assert len(store) == 1 and store.offered == 1
    assert np.allclose(store.vectors.astype(np.float32), c.learner_.transform(other[None]), atol=1e-3)
    # a refused teach keeps nothing
    before = c.learner_.negatives_
    assert not teacher.teach(c, TeachRequest(label="")).success
    assert c.learner_.negatives_ is before


def test_a_track_is_taught_from_its_recent_views():
    """Each view of the track is one shot (the object moved between frames here); the other tracks of
    those frames are the teach's negatives, as a teaching frame's other objects are."""
    port = FakePort(settings=TeachSettings(num_frames=3))
    teacher, objects = _teacher(port)
    for i in range(5):
        frame = _object_frame([(100 + 30 * i, 100, 200 + 30 * i, 200), (500, 300, 560, 360)],
                              np.stack([np.full(D, 0.1 * i), np.full(D, -1.0)]))
        objects.arrived(frame, port.clock)
        tracks = objects.update(frame, None, stamp_s=float(i))
    tid = next(t.id for t in tracks if t.proposal.box[1] == 100)
    c = _controller()
    out = teacher.teach(c, TeachRequest(label="box", track_id=tid))
    assert out.success, out.message
    assert port.commits[-1][1:3] == (f"views of track {tid} (its last 3 frames as 3 views; last at (220, 100)-(320, 200))",
                                     (3, D))
    assert (out.taught_track_id, out.taught_box) == (tid, (220, 100, 320, 200))
    np.testing.assert_allclose(port.last_feats[:, 0], [0.2, 0.3, 0.4], rtol=1e-6)
    np.testing.assert_array_equal(port.last_negatives, np.full((3, D), -1.0))  # the other track, 3 frames
    out = teacher.teach(c, TeachRequest(label="box", track_id=tid + 1, images=(_image(_scene((1, 2, 3))),)))
    assert not out.success and "send no images" in out.message


def test_a_still_track_is_taught_as_one_view():
    """A still camera's frames of a still object are copies of one view: one shot, their mean, as on
    the box path, however many frames the track had when the teach came."""
    port = FakePort(settings=TeachSettings(num_frames=4))
    teacher, objects = _teacher(port)
    for i in range(4):
        frame = _object_frame([(100, 100, 200, 200)], np.full((1, D), 0.1 * i))
        objects.arrived(frame, port.clock)
        (track,) = objects.update(frame, None, stamp_s=float(i))
    out = teacher.teach(_controller(), TeachRequest(label="box", track_id=track.id))
    assert out.success, out.message
    assert port.commits[-1][1:3] == (f"view of track {track.id} (its last 4 frames as 1 view; last at "
                                     "(100, 100)-(200, 200))", (1, D))
    np.testing.assert_allclose(port.last_feats[0], np.full(D, 0.15), rtol=1e-5)  # mean of 0, .1, .2, .3
    assert port.last_negatives is None  # no other object was in view


def test_a_feature_source_failure_is_a_refusal():
    port = FakePort(fail_extract=True)
    teacher, _ = _teacher(port)
    out = teacher.teach(_controller(), TeachRequest(label="mug", images=(_image(_scene((9, 9, 9))),)))
    assert not out.success and "did not answer" in out.message and port.commits == []


def test_decoding_checks_every_image_before_decoding_any():
    limits = RequestLimits(max_images_per_request=2)
    ok = _image(_scene((1, 2, 3)))
    with pytest.raises(ValueError, match="the most is 2"):
        decode_request_images([ok, ok, ok], limits)
    bad = replace_fields(ok, encoding="\x1b[31mweird" * 10)
    with pytest.raises(ValueError, match="image 1") as err:
        decode_request_images([ok, bad], limits)
    assert len(str(err.value)) < 300  # the echoed encoding is cut short


def replace_fields(img: SimpleNamespace, **kw: Any) -> SimpleNamespace:
    return SimpleNamespace(**{**vars(img), **kw})


def test_frames_of_one_still_view_are_one_shot_and_moved_views_stay_apart():
    """Issue 20: ten near-copies of one view taught as ten shots tell the learner the class hardly
    varies, and its gate then refuses the object from any other view (bench/bench_real_ros.py)."""
    from cbcl_pr_ros.service.object_teaching import one_shot_per_view

    rng = np.random.default_rng(1)
    still = (100, 100, 200, 180)
    jitter = [(100 + int(d), 100, 200 + int(d), 181) for d in rng.integers(-3, 4, 6)]  # a few pixels of noise
    moved = [(300, 120, 400, 200)] * 3  # the object (or the camera) moved: another view
    rows = np.concatenate([np.full((6, D), 1.0) + rng.normal(0, 0.01, (6, D)), np.full((3, D), 5.0)])
    shots = one_shot_per_view(rows, [still] + jitter[1:] + moved)
    assert shots.shape == (2, D)
    assert np.allclose(shots[0], rows[:6].mean(0), atol=1e-6) and np.allclose(shots[1], 5.0)
    assert one_shot_per_view(rows[:3], [still, moved[0], (0, 0, 50, 50)]).shape == (3, D)  # all apart
    with pytest.raises(ValueError, match="2 boxes for 3 rows"):
        one_shot_per_view(rows[:3], [still, still])


def test_stream_negatives_join_the_teach_without_the_taught_track():
    """Issue 20, outcome 3: with ``negatives`` frames+stream, the recent objects of the stream become
    negatives too, but only those seen beside the taught track, never its own vectors, nor one near the
    new shots; a refused teach keeps nothing (neither in the learner nor taken from the stream)."""
    rng = np.random.default_rng(1)
    taught, others = rng.normal(0.0, 1.0, D), rng.normal(0.0, 1.0, (3, D))
    near_copy = taught + 0.601  # the taught object as taught, seen under another track: no negative of itself
    port = FakePort(settings=TeachSettings(num_frames=1, negatives="frames+stream"))
    teacher, objects = _teacher(port)
    boxes = [(250, 180, 390, 300), (0, 0, 60, 60), (500, 0, 600, 60), (0, 400, 60, 470)]
    for i in range(3):  # the robot looks at the table for 3 s before the teach
        frame = _object_frame(boxes, np.vstack([taught[None], others]) + 0.3 * i)
        objects.arrived(frame, float(i))
        tracks = objects.update(frame, None, stamp_s=float(i))
    taught_track = next(t.id for t in tracks if tuple(t.proposal.box) == boxes[0])
    objects.negatives.add([99], near_copy[None], stamp_s=2.5)
    assert len(objects.negatives) == 13
    c = _controller()
    before, kept = c.learner_.negatives_, objects.negatives.vectors()
    assert not teacher.teach(c, TeachRequest(label="", rois=((250, 180, 140, 120),))).success
    assert c.learner_.negatives_ is before and np.array_equal(objects.negatives.vectors(), kept)
    port.frames["objects"] = [frame]
    out = teacher.teach(c, TeachRequest(label="taught", rois=((250, 180, 140, 120),)))
    assert out.success, out.message
    # 3 other objects of the teaching frame + 9 stream vectors of the 3 other tracks; the near copy was
    # seen while the taught track was not: perhaps the taught object itself, so never its negative
    assert port.last_negatives.shape == (12, D)
    taught_rows = np.vstack([taught + 0.3 * i for i in range(3)])
    assert not any(np.allclose(r, t, atol=1e-2) for r in port.last_negatives for t in taught_rows[:2])
    store = c.learner_.negatives_.vectors.astype(np.float32)
    # the teaching frame's 3 others are the stream's vectors of that very frame: copies, kept once
    assert len(store) == 9
    assert not np.isclose(store, c.learner_.transform(near_copy[None]), atol=1e-2).all(axis=1).any()
    crowd = np.vstack([taught[None] + 0.9, rng.normal(0.0, 1.0, (80, D))])
    objects.negatives.add([taught_track, *range(100, 180)], crowd, stamp_s=2.6)  # 80 objects beside it
    assert teacher.teach(c, TeachRequest(label="more", rois=((250, 180, 140, 120),))).success
    assert len(port.last_negatives) > 64  # more than a request may send: the node's own, not refused
    port.settings = TeachSettings(num_frames=1)  # "frames" (the default): the teaching frame's others only
    assert teacher.teach(c, TeachRequest(label="again", rois=((250, 180, 140, 120),))).success
    assert port.last_negatives.shape == (3, D)
    port.settings = TeachSettings(num_frames=1, negatives="stream")  # the stream's only: 9 + 80
    assert teacher.teach(c, TeachRequest(label="stream", rois=((250, 180, 140, 120),))).success
    assert port.last_negatives.shape == (89, D)
    port.settings = TeachSettings(num_frames=1, negatives="all")
    out = teacher.teach(c, TeachRequest(label="bad", rois=((250, 180, 140, 120),)))
    assert not out.success and "teach_negatives must be" in out.message and "bad" not in c.classes


def test_a_box_takes_the_object_mostly_inside_it_or_refuses_and_the_answer_names_what_it_used():
    """A box beside an object is no teach of it; a box around an object split in two teaches both pieces
    (the extractor's join of the pair, when it offered one); the answer names the box and the track."""
    from cbcl_pr_ros.objects.frame import ObjectJoins

    port = FakePort(settings=TeachSettings(teach_from="object", num_frames=2))
    teacher, objects = _teacher(port)
    mug = Proposal((100, 100, 160, 180), None, np.array([-0.1, 0.0, 0.6]), np.full(3, 0.06), 0.9)
    head = Proposal((300, 100, 360, 152), None, np.array([0.1, -0.04, 0.6]), np.full(3, 0.05), 0.9)
    body = Proposal((295, 150, 365, 240), None, np.array([0.1, 0.03, 0.6]), np.full(3, 0.06), 0.9)
    rows = np.stack([np.full(D, 0.1), np.full(D, 0.5), np.full(D, 0.6)]).astype(np.float32)
    frame = ObjectFrame([mug, head, body], rows, (480, 640))
    port.frames["objects"] = [frame, frame]
    objects.arrived(frame, port.clock)
    for _ in range(3):
        objects.update(frame, None, stamp_s=port.clock)
    c = _controller()
    out = teacher.teach(c, TeachRequest(label="duck", rois=((150, 100, 100, 100),)))  # bare table, a mug corner
    assert not out.success and "no object lies mostly inside the box" in out.message and "17 %" in out.message
    assert not c.classes
    out = teacher.teach(c, TeachRequest(label="teddy", rois=((290, 95, 80, 150),)))
    assert out.success, out.message
    assert np.allclose(sorted(port.last_feats[:, 0]), [0.5, 0.6])  # both pieces, each a view
    assert "2 pieces together" in out.message and "(295, 100)-(365, 240)" in out.message
    assert out.taught_box == (295, 100, 365, 240) and not np.any(np.isclose(port.last_negatives[:, 0], 0.5))
    joined = ObjectFrame([mug, head, body], rows, (480, 640),
                         ObjectJoins(((1, 2),), (Proposal((295, 100, 365, 240), None, np.array([0.1, 0.0, 0.6]),
                                                          np.full(3, 0.1), 0.9),), np.full((1, D), 0.55, np.float32)))
    port.frames["objects"] = [joined, joined]
    assert teacher.teach(c, TeachRequest(label="teddy", rois=((290, 95, 80, 150),))).success
    assert np.allclose(port.last_feats, 0.55)  # the whole object's crop, as the extractor joined it


def _watched(objects: ObjectStream, frames: list[ObjectFrame], start: float = 0.0) -> None:
    """The robot watched these frames before the teach: each tracked, as the node's stream does."""
    for i, frame in enumerate(frames):
        objects.arrived(frame, start + i)
        objects.update(frame, None, stamp_s=start + i)


@dataclass
class WatchingPort(FakePort):
    """The node's stream goes on during a teach: each frame handed to the teach is tracked too."""
    objects: ObjectStream | None = None

    def collect(self, n: int, timeout_s: float, stream: str) -> list[Any]:
        got = super().collect(n, timeout_s, stream)
        if stream == "objects" and self.objects is not None:
            _watched(self.objects, got, start=50.0)
        return got


def test_a_teach_of_the_object_in_view_learns_its_tracks_earlier_views():
    """The object in view was tracked while the robot moved round it: its track's earlier views (at most
    ``num_frames``, as a teach by track takes) are taught with the teach's own frames, one shot per view;
    the teach's own frames, tracked meanwhile, are not taken twice; the other tracks are no negatives
    of it beyond what the frames show."""
    port = WatchingPort(settings=TeachSettings(teach_from="object", num_frames=2))
    teacher, objects = _teacher(port)
    port.objects = objects
    corner = np.full(D, -0.5)
    earlier = [_object_frame([(130 + 40 * i, 180, 270 + 40 * i, 300), (0, 0, 60, 60)],
                             np.stack([np.full(D, 0.5 + 0.1 * i), corner])) for i in range(3)]
    _watched(objects, earlier)
    now = _object_frame([(250, 180, 390, 300), (0, 0, 60, 60)], np.stack([np.full(D, 0.9), corner]))
    port.frames["objects"] = [now, now]
    c = _controller()
    out = teacher.teach(c, TeachRequest(label="mug"))
    assert out.success, out.message
    track = out.taught_track_id
    assert track >= 0 and objects.track_at((250, 180, 390, 300)) == track
    # the last 2 earlier frames (boxes 40 px apart: two views) and the teach's 2 still frames (one view)
    assert port.commits[-1][1:3] == ("object crops of camera frames, 4 frames as 3 views; the object at "
                                     f"(250, 180)-(390, 300), track {track} + 2 earlier frames of its track", (3, D))
    np.testing.assert_allclose(sorted(port.last_feats[:, 0]), [0.6, 0.7, 0.9], rtol=1e-5)
    np.testing.assert_allclose(port.last_negatives, np.stack([corner, corner]))  # the teach's frames' other object
    assert "mug" in c.classes


def test_earlier_views_where_the_track_was_on_another_object_are_not_taught():
    """The tracker follows places: where two objects swapped places, the track's earlier views are the
    other object's. There the object taught now stood elsewhere in the same frame and looked more like
    it: those views are left out, and the answer says so."""
    port = FakePort(settings=TeachSettings(teach_from="object", num_frames=2))
    teacher, objects = _teacher(port)
    duck, can = np.linspace(0.0, 1.0, D), np.linspace(1.0, 0.0, D)
    rng = np.random.default_rng(3)
    swapped = [_object_frame([(250, 180, 390, 300), (0, 0, 60, 60)],  # the can where the duck stands now
                             np.stack([can + 0.01 * rng.normal(size=D), duck + 0.01 * rng.normal(size=D)]))
               for _ in range(2)]
    _watched(objects, swapped)
    now = _object_frame([(250, 180, 390, 300), (0, 0, 60, 60)], np.stack([duck, can]))
    port.frames["objects"] = [now, now]
    c = _controller()
    out = teacher.teach(c, TeachRequest(label="duck"))
    assert out.success, out.message
    assert port.commits[-1][1:3] == (
        f"object crop of camera frames, 2 frames as 1 view; the object at (250, 180)-(390, 300), track {out.taught_track_id} "
        "(2 earlier frames of the track left out: another object there looked more like it)", (1, D))
    np.testing.assert_allclose(port.last_feats[0], duck, rtol=1e-6)  # the duck only, never the can


def test_without_a_track_or_earlier_frames_the_teach_learns_its_own_frames_only():
    """No track of the object, or a track that begins with the teach: its own frames only, as before."""
    port = WatchingPort(settings=TeachSettings(teach_from="object", num_frames=2))
    teacher, objects = _teacher(port)
    now = _object_frame([(250, 180, 390, 300)], np.full((1, D), 0.9))
    port.frames["objects"] = [now, now]
    c = _controller()
    out = teacher.teach(c, TeachRequest(label="mug"))  # nothing tracked
    assert out.success and out.taught_track_id == -1
    assert port.commits[-1][1:3] == ("object crop of camera frames, 2 frames as 1 view; the object at "
                                     "(250, 180)-(390, 300)", (1, D))
    port.objects = objects  # tracked from now on: the track begins with the teach's own frames
    out = teacher.teach(c, TeachRequest(label="mug"))
    assert out.success and out.taught_track_id >= 0
    assert port.commits[-1][1:3] == ("object crop of camera frames, 2 frames as 1 view; the object at "
                                     f"(250, 180)-(390, 300), track {out.taught_track_id}", (1, D))
    out = teacher.teach(c, TeachRequest(label="mug"))  # the last teach's 2 frames are now earlier frames
    assert out.success and port.commits[-1][2] == (1, D)  # of the same view: still one shot
    assert port.commits[-1][1] == ("object crop of camera frames, 4 frames as 1 view; the object at "
                                   f"(250, 180)-(390, 300), track {out.taught_track_id} + 2 earlier frames of its track")


def test_a_teach_with_no_object_in_view_says_what_to_do():
    """A teach of the object in view while the camera sees none (an empty table) says how to go on,
    not only that nothing was found."""
    port = FakePort(settings=TeachSettings(teach_from="object", num_frames=2))
    teacher, _ = _teacher(port)
    empty = ObjectFrame([], np.zeros((0, D), np.float32), (480, 640))
    port.frames["objects"] = [empty, empty]
    out = teacher.teach(_controller(), TeachRequest(label="mug"))
    assert not out.success and not port.commits
    assert "no object found in any of the 2 camera frames" in out.message
    assert "put the object where the camera sees it" in out.message and "MODE_FRAME" in out.message, out.message


def test_teach_time_views_are_made_as_their_chunk_is_sent_not_all_at_once():
    """Every view of every request image used to be made before the first was sent through the
    backbone: (1 + teach_views) times the request's decoded images at once (64 images of 4096x4096
    with 16 views each: 51 GiB). Now a chunk and one image's views at a time, the same vectors."""
    import tracemalloc

    from cbcl_pr_ros.features.augment import with_teach_views

    settings = TeachSettings(views=16, view_spread=0.5, seed=3)
    rgbs = [np.random.default_rng(i).integers(0, 255, (512, 512, 3), np.uint8) for i in range(8)]
    images = tuple(_image(x) for x in rgbs)
    port = FakePort(settings=settings)
    teacher, _ = _teacher(port, RequestLimits(max_images_per_request=8))
    c = _controller()
    tracemalloc.start()
    try:
        out = teacher.teach(c, TeachRequest(label="cup", images=images, mode=2))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.success, out.message
    every_view = 8 * 17 * rgbs[0].nbytes  # all 136 images at once: 107 MB
    assert peak < every_view / 2, (peak, every_view)  # 126 MB before, 39 MB after
    assert port.extract_batches == [8] * 17
    expected = np.stack([_vector(x) for x in with_teach_views(rgbs, 16, seed=3)])
    assert np.array_equal(port.last_feats, expected[:8])  # the shots; the views as before (their spread)
