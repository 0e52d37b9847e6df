#!/usr/bin/env python3
"""Golden fixtures for vitrt's automatic mask generator and COCO accuracy tool, produced by the
OFFICIAL code: segment_anything's SamAutomaticMaskGenerator and utils/amg.py, torchvision's NMS,
OpenCV's connected components, pycocotools, and segment-anything-fast's point sampling and IoU
metric (experiments/data.py, metrics.py; copied below where it is not importable).

Usage (from the repository root; needs the reference environment /work/pyref with
segment-anything 1.0, torch, torchvision, pycocotools, opencv-python-headless, scipy):

    /work/pyref/bin/python scripts/make_amg_fixtures.py [--out tests/fixtures/amg]

Writes (see tests/fixtures/amg/README.md):
  amg_patch.pth    decoder tensors that replace those of tests/fixtures/sam/tiny1024.pth
  amg_cases.json   generator options and the records the official generator returned
  units.pth/.json  inputs and outputs of the pure functions (grids, crops, stability, NMS,
                   small regions, RLE strings, pycocotools polygons, centre points)
  coco/annotations/instances_val.json, coco_expected.json
                   a small COCO-format data set over tests/fixtures/sam/images and the mIoU
                   segment-anything-fast's metric gives for it with the tiny1024 model
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_sam_fixtures import MODEL_CONFIGS, build_custom_sam, load_rgb, setup_determinism  # noqa: E402

from segment_anything import SamAutomaticMaskGenerator, SamPredictor  # noqa: E402
from segment_anything.utils import amg as amg_utils  # noqa: E402
from torchvision.ops.boxes import batched_nms  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, ".."))
SAM_FIX = os.path.join(ROOT, "tests", "fixtures", "sam")


def load_tiny1024():
    sam = build_custom_sam(MODEL_CONFIGS["tiny1024"])
    sam.load_state_dict(torch.load(os.path.join(SAM_FIX, "tiny1024.pth"), weights_only=True))
    sam.eval()
    return sam


# ----------------------------------------------------------------------------------------------
# The AMG model: tiny1024 with a re-engineered mask head
# ----------------------------------------------------------------------------------------------
# With random weights every point gives the same high-frequency noise mask (checkerboards of
# the 2x2 transposed convs, one sign almost everywhere), so the generator keeps one record and
# nothing is compared. The patch makes the masks follow the image and vary with the point:
#  * the image encoder's last 3x3 neck conv keeps only its centre tap (its zero padding drew a
#    line along the image border into every mask, so every box spanned the image);
#  * each transposed conv gets the mean of its 2x2 kernel taps at every tap (no checkerboard);
#  * the last image-to-token attention's q, k and v projections are scaled by 4: the image tokens
#    then attend to the point token by position (its Fourier features), so masks depend on it;
#  * each hypernetwork's last bias is a random vector orthogonal to the mean upscaled feature
#    on the landscape image, norm 60, sign flipped (masks = image regions, not background),
#    minus 0.6 / |mean| along that mean (a logit offset of -0.6: smaller masks);
#  * the IoU head's last bias gets +0.2 so the predicted IoUs straddle a positive threshold.
PATCH_KEYS = [
    "image_encoder.neck.2.weight",
    "mask_decoder.output_upscaling.0.weight",
    "mask_decoder.output_upscaling.3.weight",
    "mask_decoder.iou_prediction_head.layers.2.bias",
] + [f"mask_decoder.transformer.layers.1.cross_attn_image_to_token.{p}_proj.weight" for p in ("q", "k", "v")
     ] + [f"mask_decoder.output_hypernetworks_mlps.{i}.layers.2.bias" for i in range(4)]


@torch.no_grad()
def make_amg_model():
    sam = load_tiny1024()
    md = sam.mask_decoder
    neck = sam.image_encoder.neck[2].weight  # 3x3 conv with zero padding: keep the centre tap only
    centre = neck[:, :, 1, 1].clone()
    neck.zero_()
    neck[:, :, 1, 1] = centre
    for conv in (md.output_upscaling[0], md.output_upscaling[3]):
        w = conv.weight
        w.copy_(w.mean(dim=(2, 3), keepdim=True).expand_as(w).clone())
    attn = md.transformer.layers[-1].cross_attn_image_to_token  # image tokens -> prompt tokens
    for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
        proj.weight.mul_(4.0)
    feats = {}
    hook = md.output_upscaling.register_forward_hook(lambda m, i, o: feats.__setitem__("up", o.detach()))
    p = SamPredictor(sam)
    p.set_image(load_rgb(os.path.join(SAM_FIX, "images", "landscape.png")))
    p.predict(np.array([[10.0, 10.0]]), np.array([1]))
    hook.remove()
    mvec = feats["up"][0].mean((1, 2)).double()
    g = torch.Generator().manual_seed(99)
    for mlp in md.output_hypernetworks_mlps:
        b = torch.randn(mvec.numel(), generator=g, dtype=torch.float64)
        b = b - (b @ mvec) / (mvec @ mvec) * mvec
        b = b / b.norm() * -60.0 - mvec / (mvec @ mvec) * 0.6
        mlp.layers[-1].bias.copy_(b.float())
    md.iou_prediction_head.layers[-1].bias.add_(0.2)
    sd = sam.state_dict()
    patch = {k: sd[k].clone().contiguous() for k in PATCH_KEYS}
    return sam, patch


# name -> (image, options). Thresholds are lowered for random weights: predicted IoUs here are
# about -0.01 .. 0.22, and the logits are small, so stability scores at offset 1 are mostly near 0
# (offsets 0.1 .. 0.25 spread them over 0 .. 0.9); box NMS is loosened a little because the
# masks of neighbouring points overlap a lot.
AMG_CASES = {
    "land_pps12": ("landscape", dict(points_per_side=12, pred_iou_thresh=0.1, stability_score_thresh=0.0005,
                                     box_nms_thresh=0.85)),
    "land_crops1": ("landscape", dict(points_per_side=8, points_per_batch=50, pred_iou_thresh=0.1,
                                      stability_score_thresh=0.1, stability_score_offset=0.25, crop_n_layers=1,
                                      box_nms_thresh=0.9)),
    "port_minarea": ("portrait", dict(points_per_side=12, pred_iou_thresh=0.1, stability_score_thresh=0.55,
                                      stability_score_offset=0.1, box_nms_thresh=0.95, min_mask_region_area=150)),
    "land_crops1_minarea": ("landscape", dict(points_per_side=8, pred_iou_thresh=0.05, stability_score_thresh=0.1,
                                              stability_score_offset=0.25, crop_n_layers=1,
                                              crop_n_points_downscale_factor=2, min_mask_region_area=60,
                                              box_nms_thresh=0.9, crop_nms_thresh=0.6)),
}


def run_amg_cases(sam):
    out = {}
    for name, (image, opts) in AMG_CASES.items():
        img = load_rgb(os.path.join(SAM_FIX, "images", f"{image}.png"))
        gen = SamAutomaticMaskGenerator(sam, output_mode="coco_rle", **opts)
        recs = gen.generate(img)
        print(f"[amg] {name}: {image} {img.shape[1]}x{img.shape[0]} {opts} -> {len(recs)} records")
        out[name] = {
            "image": image,
            "options": opts,
            "records": [
                {
                    "segmentation": r["segmentation"],
                    "area": int(r["area"]),
                    "bbox": [int(v) for v in r["bbox"]],
                    "predicted_iou": float(r["predicted_iou"]),
                    "point_coords": [float(v) for v in r["point_coords"][0]],
                    "stability_score": float(r["stability_score"]),
                    "crop_box": [int(v) for v in r["crop_box"]],
                }
                for r in recs
            ],
        }
    return out


# ----------------------------------------------------------------------------------------------
# Pure functions
# ----------------------------------------------------------------------------------------------


def remove_small_regions(mask, area_thresh, mode):
    return amg_utils.remove_small_regions(mask, area_thresh, mode)


def blob_masks(rng, n, h, w):
    """Random masks with holes and islands of many sizes (smoothed noise, thresholded)."""
    masks = []
    for _ in range(n):
        noise = rng.standard_normal((h // 4 + 2, w // 4 + 2))
        up = np.kron(noise, np.ones((4, 4)))[:h, :w]
        k = np.ones(3) / 3
        up = np.apply_along_axis(lambda r: np.convolve(r, k, mode="same"), 1, up)
        up = np.apply_along_axis(lambda c: np.convolve(c, k, mode="same"), 0, up)
        m = up > rng.uniform(-0.3, 0.6)
        m |= rng.random((h, w)) < 0.01  # single-pixel islands
        m &= rng.random((h, w)) > 0.01  # single-pixel holes
        masks.append(m)
    return np.stack(masks)


def make_units(rng):
    t = {}
    j = {}
    # Point grids.
    grid_cases = [(32, 0, 1), (7, 2, 2), (1, 0, 1), (5, 1, 1), (12, 1, 2), (3, 3, 1)]
    j["grids"] = []
    for gi, (n, layers, scale) in enumerate(grid_cases):
        grids = amg_utils.build_all_layer_point_grids(n, layers, scale)
        for li, g in enumerate(grids):
            t[f"grid{gi}.{li}"] = torch.from_numpy(np.ascontiguousarray(g, dtype=np.float64))
        j["grids"].append({"n": n, "layers": layers, "scale": scale, "count": len(grids)})
    # Crop boxes.
    crop_cases = [(360, 640, 1, 512 / 1500), (500, 300, 2, 512 / 1500), (768, 1024, 3, 0.2), (23, 37, 2, 0.5),
                  (1500, 2000, 1, 512 / 1500), (480, 640, 2, 0.0)]
    j["crops"] = []
    for ci, (h, w, layers, ratio) in enumerate(crop_cases):
        boxes, layer_idx = amg_utils.generate_crop_boxes((h, w), layers, ratio)
        t[f"crops{ci}"] = torch.tensor([b + [l] for b, l in zip(boxes, layer_idx)], dtype=torch.int64)
        j["crops"].append({"h": h, "w": w, "layers": layers, "ratio": ratio})
    # Stability scores: logits with values exactly at the thresholds too.
    logits = torch.from_numpy(rng.standard_normal((6, 21, 33)).astype(np.float32) * 2)
    logits[0, 0, :5] = torch.tensor([1.0, -1.0, 0.0, 0.3, -0.3])
    t["stab.logits"] = logits
    for off in (1.0, 0.3):
        t[f"stab.{off}"] = amg_utils.calculate_stability_score(logits, 0.0, off)
    # NMS: integer boxes (as the generator has) with duplicates and tied scores.
    for tag, n in (("small", 300), ("large", 1500)):
        x0 = rng.integers(0, 200, n)
        y0 = rng.integers(0, 150, n)
        bw = rng.integers(1, 120, n)
        bh = rng.integers(1, 90, n)
        boxes = np.stack([x0, y0, x0 + bw, y0 + bh], 1).astype(np.float32)
        boxes[n // 2:n // 2 + 20] = boxes[:20]  # exact duplicates
        scores = rng.choice(np.float32([0.1, 0.5, 0.9, 0.25]), n) + rng.integers(0, 3, n).astype(np.float32) * 0.01
        bt, st = torch.from_numpy(boxes), torch.from_numpy(scores.astype(np.float32))
        t[f"nms.{tag}.boxes"] = bt
        t[f"nms.{tag}.scores"] = st
        for thr in (0.7, 0.3):
            t[f"nms.{tag}.keep{thr}"] = batched_nms(bt, st, torch.zeros(n), iou_threshold=thr)
    # Small regions.
    masks = blob_masks(rng, 6, 64, 80)
    t["regions.masks"] = torch.from_numpy(masks.astype(np.uint8))
    for area in (3, 30, 400):
        for mode in ("holes", "islands"):
            res = [remove_small_regions(m, area, mode) for m in masks]
            t[f"regions.{mode}.{area}"] = torch.from_numpy(np.stack([r[0] for r in res]).astype(np.uint8))
            t[f"regions.{mode}.{area}.changed"] = torch.tensor([int(r[1]) for r in res], dtype=torch.int64)
    # One tiny all-small-islands mask (keep the largest).
    tiny = np.zeros((9, 11), bool)
    tiny[1, 1] = tiny[1, 2] = tiny[5, 5] = tiny[7, 9] = tiny[8, 9] = tiny[8, 10] = True
    t["regions.tiny"] = torch.from_numpy(tiny.astype(np.uint8))
    t["regions.tiny.islands"] = torch.from_numpy(remove_small_regions(tiny, 10, "islands")[0].astype(np.uint8))
    # RLE: uncompressed counts and COCO strings of generator-style masks.
    rle_masks = torch.from_numpy(blob_masks(rng, 4, 37, 53))
    rle_masks[0] = True
    rle_masks[1] = False
    t["rle.masks"] = rle_masks.to(torch.uint8)
    rles = amg_utils.mask_to_rle_pytorch(rle_masks)
    j["rle"] = [{"counts": r["counts"], "coco": amg_utils.coco_encode_rle(r)["counts"]} for r in rles]
    # pycocotools polygons (merged per object, like COCO.annToRLE) and boxes.
    from pycocotools import mask as mask_utils
    h, w = 57, 73
    polys = [
        [[10.2, 5.5, 60.7, 8.1, 40.3, 50.9, 5.0, 30.25]],
        [[0, 0, 72.9, 0, 72.9, 56.9, 0, 56.9]],
        [[-5.3, -2.0, 30.0, 10.0, 80.0, 70.0]],  # outside the image
        [[20.5, 20.5, 20.5, 20.5, 30.5, 40.5, 20.5, 20.5, 10.0, 45.0]],  # repeated points
        [[5, 5, 20, 5, 20, 20, 5, 20], [30.1, 30.2, 50.3, 31.4, 45.5, 52.6, 33.7, 49.8, 31.9, 40.0]],  # two parts
        [[12.49, 12.51, 12.5, 40.5, 13.5, 40.5, 13.5, 12.5]],  # thin sliver at .5 boundaries
        [[float(v) for v in rng.uniform(-3, 76, 24)]],  # self-intersecting
    ]
    j["polygons"] = []
    for segm in polys:
        rles = mask_utils.frPyObjects(segm, h, w)
        rle = mask_utils.merge(rles)
        j["polygons"].append({"h": h, "w": w, "segmentation": segm,
                              "counts": rle["counts"].decode("ascii"),
                              "parts": [r["counts"].decode("ascii") for r in rles]})
    bboxes = [[3.2, 4.7, 20.1, 11.6], [0, 0, 73, 57], [50.5, 40.5, 30, 30]]
    j["bboxes"] = [{"h": h, "w": w, "bbox": b, "counts": mask_utils.frPyObjects(np.array([b], dtype=np.double), h, w)[0]["counts"].decode("ascii")}
                   for b in bboxes]
    # Centre points (segment-anything-fast), on masks where the centre of mass is outside too.
    centre_masks = []
    m = np.zeros((40, 50), np.uint8)
    m[5:35, 5:12] = 1
    m[5:12, 5:45] = 1
    m[28:35, 5:45] = 1  # a "C": centre of mass in the gap
    centre_masks.append(m)
    m = np.zeros((40, 50), np.uint8)
    m[10:13, 3:47] = 1
    m[30:33, 3:47] = 1  # two bars
    centre_masks.append(m)
    m = np.zeros((30, 30), np.uint8)
    m[14, 14] = m[14, 15] = 1  # a half-pixel centre: round half to even
    centre_masks.append(m)
    ring = np.zeros((120, 120), np.uint8)
    yy, xx = np.mgrid[:120, :120]
    rr = np.sqrt((yy - 60) ** 2 + (xx - 60) ** 2)
    ring[(rr > 15) & (rr < 55)] = 1  # thick ring: fallback stops early per row
    centre_masks.append(ring)
    j["centres"] = []
    for ci, m in enumerate(centre_masks):
        t[f"centre{ci}"] = torch.from_numpy(m)
        j["centres"].append(list(get_center_point(m)))
    return t, j


# ----------------------------------------------------------------------------------------------
# segment-anything-fast's metric (experiments/data.py, metrics.py)
# ----------------------------------------------------------------------------------------------


def get_center_point(mask):
    """experiments/data.py:_get_center_point without the cache, otherwise verbatim."""
    from scipy import ndimage
    com_y, com_x = ndimage.center_of_mass(mask)
    com_y, com_x = int(round(com_y, 0)), int(round(com_x, 0))
    if mask[com_y][com_x]:
        return (com_x, com_y)
    distances_to_check_deg = [0, 90, 180, 270]
    global_min_max_distance = float('-inf')
    global_coords = None
    DISTANCE_GOOD_ENOUGH_THRESHOLD = 20
    for row_idx in range(mask.shape[0]):
        for col_idx in range(mask.shape[1]):
            cur_point = mask[row_idx, col_idx]
            if not cur_point:
                continue
            max_distances = []
            for direction in distances_to_check_deg:
                if direction == 0:
                    cur_row_idx = row_idx
                    while cur_row_idx >= 0 and mask[cur_row_idx, col_idx]:
                        cur_row_idx = cur_row_idx - 1
                    cur_row_idx += 1
                    distance = row_idx - cur_row_idx
                    max_distances.append(distance)
                elif direction == 90:
                    cur_col_idx = col_idx
                    while cur_col_idx <= mask.shape[1] - 1 and mask[row_idx, cur_col_idx]:
                        cur_col_idx += 1
                    cur_col_idx -= 1
                    distance = cur_col_idx - col_idx
                    max_distances.append(distance)
                elif direction == 180:
                    cur_row_idx = row_idx
                    while cur_row_idx <= mask.shape[0] - 1 and mask[cur_row_idx, col_idx]:
                        cur_row_idx = cur_row_idx + 1
                    cur_row_idx -= 1
                    distance = cur_row_idx - row_idx
                    max_distances.append(distance)
                elif direction == 270:
                    cur_col_idx = col_idx
                    while cur_col_idx >= 0 and mask[row_idx, cur_col_idx]:
                        cur_col_idx -= 1
                    cur_col_idx += 1
                    distance = col_idx - cur_col_idx
                    max_distances.append(distance)
            min_max_distance = min(max_distances)
            if min_max_distance > global_min_max_distance:
                global_min_max_distance = min_max_distance
                global_coords = (col_idx, row_idx)
            if global_min_max_distance >= DISTANCE_GOOD_ENOUGH_THRESHOLD:
                break
    return global_coords


def coco_dataset(rng):
    """A small COCO-format data set over the SAM fixture images: polygons (one and several
    parts), an uncompressed-RLE crowd annotation, a compressed-RLE one, a shape whose centre of
    mass lies outside it, an image without annotations (skipped by the metric) and an
    annotation of an unknown category (dropped by getAnnIds(catIds=all))."""
    from pycocotools import mask as mask_utils
    images = [
        {"id": 7, "file_name": "landscape.png", "height": 360, "width": 640},
        {"id": 3, "file_name": "tiny.png", "height": 23, "width": 37},  # no annotations
        {"id": 12, "file_name": "portrait.png", "height": 500, "width": 300},
    ]
    cats = [{"id": 1, "name": "blob", "supercategory": "shape"}, {"id": 5, "name": "bar", "supercategory": "shape"}]
    anns = []

    def add(image_id, cat, segm, iscrowd=0):
        anns.append({"id": 100 + len(anns), "image_id": image_id, "category_id": cat, "segmentation": segm,
                     "iscrowd": iscrowd, "area": 0.0, "bbox": [0, 0, 0, 0]})

    add(7, 1, [[400.5, 90.2, 470.3, 85.0, 520.7, 180.4, 455.0, 240.9, 390.1, 200.0]])
    add(7, 5, [[210.0, 10.0, 330.0, 10.0, 330.0, 120.0, 210.0, 120.0], [100.4, 250.2, 160.6, 260.8, 130.0, 330.3]])
    cmask = np.zeros((360, 640), np.uint8)
    cmask[200:340, 20:60] = 1
    cmask[200:230, 20:200] = 1
    cmask[310:340, 20:200] = 1  # "C": centre of mass outside
    add(7, 1, {"size": [360, 640], "counts": mask_utils.encode(np.asfortranarray(cmask))["counts"].decode("ascii")})
    crowd = np.zeros((360, 640), np.uint8)
    crowd[40:100, 500:620] = 1
    crowd[60:80, 540:560] = 0
    rle = amg_utils.mask_to_rle_pytorch(torch.from_numpy(crowd.astype(bool))[None])[0]
    add(7, 5, {"size": rle["size"], "counts": rle["counts"]}, iscrowd=1)
    add(7, 99, [[10.0, 10.0, 50.0, 10.0, 50.0, 50.0]])  # unknown category
    add(12, 1, [[50.2, 300.1, 250.8, 310.6, 240.0, 480.0, 60.0, 470.3]])
    add(12, 5, [[float(v) for v in rng.uniform(20, 280, 12)]])
    add(12, 1, [[150.0, 60.0, 200.0, 100.0, 150.0, 140.0, 100.0, 100.0]])
    return {"info": {"description": "vitrt eval-coco fixture"}, "images": images, "annotations": anns,
            "categories": cats}


@torch.no_grad()
def coco_reference(ds_dir, sam):
    from pycocotools.coco import COCO
    coco = COCO(os.path.join(ds_dir, "annotations", "instances_val.json"))
    catIds = coco.getCatIds()
    img_ids = [i for i in coco.getImgIds() if len(coco.getAnnIds(imgIds=i, catIds=catIds, iscrowd=None)) != 0]
    predictor = SamPredictor(sam)
    per_ann = []
    for img_id in img_ids:
        info = coco.loadImgs(img_id)[0]
        image = load_rgb(os.path.join(SAM_FIX, "images", info["file_name"]))
        anns = coco.loadAnns(coco.getAnnIds(imgIds=info["id"], catIds=catIds, iscrowd=None))
        coords_list, gt = [], []
        for ann in anns:
            mask = coco.annToMask(ann)
            gt.append(torch.tensor(mask))
            coords_list.append(get_center_point(mask))
        predictor.set_image(image)
        coords = predictor.transform.apply_coords(np.array(coords_list), image.shape[:2])
        coords = torch.tensor(coords, dtype=torch.float)
        labels = torch.ones((coords.size(0), 1), dtype=torch.int)
        masks, scores, _ = predictor.predict_torch(point_coords=coords.unsqueeze(1), point_labels=labels,
                                                   multimask_output=True)
        # metrics.create_result_entry
        argmax_scores = torch.argmax(scores, dim=1)
        inference_masks = masks.gather(1, argmax_scores.unsqueeze(-1).unsqueeze(-1).unsqueeze(-1).expand(
            (masks.size(0), 1, masks.size(2), masks.size(3)))).squeeze(1)
        gt_masks = torch.stack(gt)
        inter = torch.logical_and(inference_masks, gt_masks)
        union = torch.logical_or(inference_masks, gt_masks)
        ious = inter.sum(dim=(-1, -2)) / union.sum(dim=(-1, -2))
        for a, c, iou, k in zip(anns, coords_list, ious, argmax_scores):
            per_ann.append({"image_id": img_id, "ann_id": a["id"], "center": list(c), "best": int(k),
                            "iou": float(iou)})
    miou = float(np.mean([p["iou"] for p in per_ann]))  # pandas' mean of the float column
    return {"images": len(img_ids), "miou": miou, "annotations": per_ann}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "amg"))
    ap.add_argument("--skip-amg", action="store_true", help="only the unit and COCO fixtures")
    args = ap.parse_args(argv)
    setup_determinism(1)
    torch.set_num_threads(2)  # the generator is slow on one thread; results do not depend on it
    out = os.path.normpath(args.out)
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(2024)

    t, j = make_units(rng)
    torch.save(t, os.path.join(out, "units.pth"))
    with open(os.path.join(out, "units.json"), "w") as f:
        json.dump(j, f, indent=1)
        f.write("\n")
    print(f"[units] {len(t)} tensors")

    ds_dir = os.path.join(out, "coco")
    os.makedirs(os.path.join(ds_dir, "annotations"), exist_ok=True)
    with open(os.path.join(ds_dir, "annotations", "instances_val.json"), "w") as f:
        json.dump(coco_dataset(rng), f, indent=1)
        f.write("\n")
    ref = coco_reference(ds_dir, load_tiny1024())
    with open(os.path.join(out, "coco_expected.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    print(f"[coco] mIoU {ref['miou']:.6f} over {len(ref['annotations'])} annotations")

    if not args.skip_amg:
        sam, patch = make_amg_model()
        torch.save(patch, os.path.join(out, "amg_patch.pth"))
        cases = run_amg_cases(sam)
        with open(os.path.join(out, "amg_cases.json"), "w") as f:
            json.dump(cases, f)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
