"""vitrt's Python API against vitrt's command line on the same fixtures, plus the reference's
argument conventions and the error types.

The CLI is found through $VITRT_CLI, else build/bin/vitrt; the tests that need it are skipped
when neither exists. Fixtures: tests/fixtures/sam (tiny1024, a small untrained SAM).
"""
import json
import os
import subprocess

import numpy as np
import pytest

import vitrt

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAM = os.path.join(ROOT, "tests", "fixtures", "sam")
MODEL = os.path.join(SAM, "tiny1024.pth")
CONFIG = os.path.join(SAM, "tiny1024.json")
CLI = os.environ.get("VITRT_CLI") or os.path.join(ROOT, "build", "bin", "vitrt")
needs_cli = pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"vitrt CLI not found at {CLI} (set VITRT_CLI)")


def image_path(name):
    return os.path.join(SAM, "images", name + ".png")


@pytest.fixture(scope="module")
def sam():
    return vitrt.load(MODEL, config=CONFIG)


@pytest.fixture(scope="module")
def predictors(sam):
    """One predictor per fixture image, embedded once."""
    out = {}
    for name in ("tiny", "portrait", "landscape"):
        p = vitrt.SamPredictor(sam)
        p.set_image(vitrt.read_image(image_path(name)))
        out[name] = p
    return out


def rle_decode(rle):
    """pycocotools' compressed counts string -> HxW uint8 mask (written here, independently)."""
    h, w = rle["size"]
    s = rle["counts"]
    counts, p = [], 0
    while p < len(s):
        x, k, more = 0, 0, True
        while more:
            c = ord(s[p]) - 48
            x |= (c & 0x1F) << (5 * k)
            more = c & 0x20
            p += 1
            k += 1
            if not more and (c & 0x10):
                x |= -1 << (5 * k)
        if len(counts) > 2:
            x += counts[-2]
        counts.append(x)
    flat = np.zeros(h * w, np.uint8)
    pos, value = 0, 0
    for n in counts:
        flat[pos:pos + n] = value
        pos += n
        value ^= 1
    assert pos == h * w
    return flat.reshape(w, h).T  # counts run column by column


def run_cli(tmp_path, image, *args):
    out = tmp_path / "cli"
    cmd = [CLI, "segment", "--checkpoint", MODEL, "--config", CONFIG, "--image", image, "--out", str(out), "-q",
           *args]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    with open(out / "result.json") as f:
        return out, json.load(f)


def assert_same_as_cli(out_dir, result, masks, scores, low_res):
    cli_masks = result["masks"]
    assert len(cli_masks) == len(scores)
    for k, m in enumerate(cli_masks):
        assert np.float32(m["score"]) == scores[k], f"score {k}"
        np.testing.assert_array_equal(rle_decode(m["segmentation"]), masks[k].astype(np.uint8), err_msg=f"mask {k}")
        assert m["area"] == int(masks[k].sum())
        cli_low = np.load(out_dir / m["low_res_logits"])
        np.testing.assert_array_equal(cli_low[0], low_res[k], err_msg=f"low-res logits {k}")


@needs_cli
@pytest.mark.parametrize("name,point", [("tiny", (15.3, 12.7)), ("portrait", (129.3, 280.7)),
                                        ("landscape", (275.5, 201.0))])
def test_one_point_matches_cli(tmp_path, predictors, name, point):
    masks, scores, low_res = predictors[name].predict(point_coords=np.array([point]), point_labels=np.array([1]))
    assert masks.dtype == np.bool_ and scores.dtype == np.float32 and low_res.dtype == np.float32
    h, w = predictors[name].original_size
    assert masks.shape == (3, h, w) and scores.shape == (3,) and low_res.shape == (3, 256, 256)
    out, result = run_cli(tmp_path, image_path(name), "--point", f"{point[0]},{point[1]}")
    assert_same_as_cli(out, result, masks, scores, low_res)


@needs_cli
def test_points_box_single_mask_match_cli(tmp_path, predictors):
    p = predictors["portrait"]
    coords = np.array([[100.5, 200.25], [180.0, 240.0]], dtype=np.float64)  # converted like the reference's
    labels = np.array([1, 0])
    box = np.array([50.0, 110.0, 230.0, 400.0])
    masks, scores, low_res = p.predict(point_coords=coords, point_labels=labels, box=box, multimask_output=False)
    assert masks.shape == (1, 500, 300)
    out, result = run_cli(tmp_path, image_path("portrait"), "--point", "100.5,200.25,1", "--point", "180,240,0",
                          "--box", "50,110,230,400", "--single-mask")
    assert_same_as_cli(out, result, masks, scores, low_res)


@needs_cli
def test_mask_input_round_trip_matches_cli(tmp_path, predictors):
    p = predictors["tiny"]
    masks, scores, low_res = p.predict(point_coords=np.array([[15.0, 12.0]]), point_labels=np.array([1]))
    best = int(np.argmax(scores))
    mask_input = low_res[best][None, :, :]  # (1, 256, 256), as the reference's examples pass it
    m2, s2, l2 = p.predict(point_coords=np.array([[15.0, 12.0], [5.0, 5.0]]), point_labels=np.array([1, 0]),
                           mask_input=mask_input, multimask_output=False)
    np.save(tmp_path / "mask_input.npy", mask_input)
    out, result = run_cli(tmp_path, image_path("tiny"), "--point", "15,12,1", "--point", "5,5,0", "--single-mask",
                          "--mask-input", str(tmp_path / "mask_input.npy"))
    assert_same_as_cli(out, result, m2, s2, l2)


def test_return_logits_and_image_format(sam, predictors):
    p = predictors["landscape"]
    masks, scores, _ = p.predict(point_coords=np.array([[300, 150]]), point_labels=np.array([1]))
    logits, scores2, _ = p.predict(point_coords=np.array([[300, 150]]), point_labels=np.array([1]),
                                   return_logits=True)
    assert logits.dtype == np.float32 and logits.shape == masks.shape
    np.testing.assert_array_equal(logits > 0, masks)
    np.testing.assert_array_equal(scores, scores2)

    bgr = vitrt.SamPredictor(sam)
    bgr.set_image(vitrt.read_image(image_path("landscape"))[..., ::-1], image_format="BGR")
    np.testing.assert_array_equal(bgr.get_image_embedding(), p.get_image_embedding())


def test_embedding_and_sizes(predictors):
    p = predictors["portrait"]
    assert p.is_image_set
    assert p.original_size == (500, 300)
    assert p.input_size == (1024, 614)
    emb = p.get_image_embedding()
    assert emb.shape == (1, 32, 64, 64) and emb.dtype == np.float32


def test_errors_are_python_exceptions(sam, tmp_path):
    p = vitrt.SamPredictor(sam)
    with pytest.raises(RuntimeError, match="set_image"):
        p.predict(point_coords=np.array([[1, 1]]), point_labels=np.array([1]))
    with pytest.raises(ValueError, match=r"\(H, W, 3\)"):
        p.set_image(np.zeros((10, 10), np.uint8))
    with pytest.raises(ValueError, match="uint8"):
        p.set_image(np.zeros((10, 10, 3), np.float32))
    p.set_image(np.full((20, 30, 3), 128, np.uint8))
    with pytest.raises(ValueError, match="point_labels must be supplied"):
        p.predict(point_coords=np.array([[1, 1]]))
    with pytest.raises(vitrt.InvalidArgument, match="outside the 30x20 image"):
        p.predict(point_coords=np.array([[100, 1]]), point_labels=np.array([1]))
    with pytest.raises(ValueError, match="negative size"):
        p.predict(box=np.array([10, 10, 5, 5]))
    with pytest.raises(ValueError, match="mask input"):
        p.predict(point_coords=np.array([[1, 1]]), point_labels=np.array([1]), mask_input=np.zeros((1, 64, 64)))
    with pytest.raises(OSError):
        vitrt.load(str(tmp_path / "missing.pth"))
    garbage = tmp_path / "garbage.pth"
    garbage.write_bytes(b"not a checkpoint at all" * 10)
    with pytest.raises(vitrt.Error):
        vitrt.load(str(garbage))
    with pytest.raises(vitrt.CheckpointError):
        vitrt.load(os.path.join(ROOT, "tests", "fixtures", "checkpoint", "evil_posix_system.pth"))
    with pytest.raises(ValueError, match="device"):
        vitrt.load(MODEL, device="tpu", config=CONFIG)
    with pytest.raises(ValueError, match="dtype"):
        vitrt.load(MODEL, config=CONFIG, dtype="fp16")
    with pytest.raises(ValueError, match="fp32 only"):
        vitrt.load(MODEL, device="cpu", config=CONFIG, dtype="bf16")
    with pytest.raises(ValueError, match="fp32 only"):
        vitrt.load(MODEL, device="cpu", config=CONFIG, decoder_dtype="bf16")
    with pytest.raises(ValueError, match="decoder_dtype"):
        vitrt.load(MODEL, device="cpu", config=CONFIG, decoder_dtype="fp8")
    assert vitrt.load(MODEL, device="cpu", config=CONFIG, decoder_dtype="fp32").device == "cpu"


def test_load_device_auto_picks_an_available_device():
    # "auto" is the GPU where this build has the CUDA backend and one is present, else the CPU.
    m = vitrt.load(MODEL, config=CONFIG)
    assert m.device in ("cpu", "cuda")
    assert vitrt.load(MODEL, device="cpu", config=CONFIG).device == "cpu"


@pytest.mark.skipif(not vitrt._vitrt.HAVE_AMG, reason="built without the automatic mask generator")
def test_automatic_mask_generator_records(sam):
    image = vitrt.read_image(image_path("tiny"))
    gen = vitrt.SamAutomaticMaskGenerator(sam, points_per_side=4, pred_iou_thresh=0.0, stability_score_thresh=0.0)
    records = gen.generate(image)
    assert isinstance(records, list)
    for r in records:
        assert set(r) == {"segmentation", "area", "bbox", "predicted_iou", "point_coords", "stability_score",
                          "crop_box"}
        assert r["segmentation"].shape == (23, 37) and r["segmentation"].dtype == np.bool_
        assert r["area"] == int(r["segmentation"].sum())
        assert len(r["bbox"]) == 4 and len(r["point_coords"]) == 1
    coco = vitrt.SamAutomaticMaskGenerator(sam, points_per_side=4, pred_iou_thresh=0.0, stability_score_thresh=0.0,
                                           output_mode="coco_rle").generate(image)
    assert len(coco) == len(records)
    for a, b in zip(records, coco):
        np.testing.assert_array_equal(rle_decode(b["segmentation"]), a["segmentation"].astype(np.uint8))
    with pytest.raises(ValueError):
        vitrt.SamAutomaticMaskGenerator(sam, points_per_side=None)


# ---- many images: embed_images, Embedding, set_embedding, load_embedding


def test_embed_images_then_set_embedding_predicts_as_set_image(sam, predictors, tmp_path):
    names = ("tiny", "portrait", "landscape")
    images = [vitrt.read_image(image_path(n)) for n in names]
    embs = vitrt.embed_images(sam, images, batch_size=2)  # two batches: 2 + 1
    assert len(embs) == 3 and all(isinstance(e, vitrt.Embedding) for e in embs)
    for name, image, emb in zip(names, images, embs):
        ref = predictors[name]
        assert emb.original_size == image.shape[:2] == ref.original_size
        assert emb.input_size == ref.input_size
        assert emb.features.shape == ref.get_image_embedding().shape
        # a batch changes only the encoder's summation order
        np.testing.assert_allclose(emb.features, ref.get_image_embedding(), rtol=0, atol=2e-5)
        p = vitrt.SamPredictor(sam)
        p.set_embedding(emb)
        box = np.array([2, 3, image.shape[1] - 4, image.shape[0] - 5], dtype=np.float32)
        m1, s1, l1 = p.predict(box=box, multimask_output=False)
        m2, s2, l2 = ref.predict(box=box, multimask_output=False)
        np.testing.assert_allclose(l1, l2, rtol=0, atol=1e-4)
        np.testing.assert_allclose(s1, s2, rtol=0, atol=1e-5)
    # a file that `vitrt segment --embedding` reads, and back
    path = str(tmp_path / "portrait.vemb")
    embs[1].save(path)
    back = vitrt.load_embedding(path)
    assert back.original_size == embs[1].original_size and back.model_fingerprint == embs[1].model_fingerprint
    np.testing.assert_array_equal(back.features, embs[1].features)
    assert "Embedding(original_size=(500, 300)" in repr(back)


def test_embed_images_rejects_bad_input(sam):
    img = vitrt.read_image(image_path("tiny"))
    with pytest.raises(ValueError, match="sequence of images"):
        vitrt.embed_images(sam, img)
    with pytest.raises(ValueError, match="uint8"):
        vitrt.embed_images(sam, [img.astype(np.float32)])
    with pytest.raises(ValueError, match="batch_size"):
        vitrt.embed_images(sam, [img], batch_size=0)
    with pytest.raises(TypeError):
        vitrt.SamPredictor(sam).set_embedding(img)
    with pytest.raises(vitrt.Error):
        vitrt.load_embedding(os.path.join(SAM, "tiny1024.json"))  # not an embedding file
    assert vitrt.embed_images(sam, []) == []


def test_bgr_images_embed_like_rgb(sam):
    img = vitrt.read_image(image_path("tiny"))
    rgb = vitrt.embed_images(sam, [img])[0]
    bgr = vitrt.embed_images(sam, [np.ascontiguousarray(img[..., ::-1])], image_format="BGR")[0]
    np.testing.assert_array_equal(rgb.features, bgr.features)
