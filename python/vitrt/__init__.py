"""vitrt: Segment Anything (SAM) in C++, with the reference's Python API.

    import vitrt
    sam = vitrt.load("sam_vit_b_01ec64.pth")          # official .pth or HF .safetensors
    predictor = vitrt.SamPredictor(sam)
    predictor.set_image(image)                         # HxWx3 uint8, RGB (or image_format="BGR")
    masks, scores, low_res = predictor.predict(point_coords=np.array([[500, 375]]),
                                               point_labels=np.array([1]))

`SamPredictor.predict` and `SamAutomaticMaskGenerator.generate` take and return what
segment_anything's do (NumPy arrays, the same shapes and dtypes, the same record dicts).

Many images: embed them in batches (one encoder launch per batch), then prompt each embedding:

    for image, emb in zip(images, vitrt.embed_images(sam, images, batch_size=16)):
        predictor.set_embedding(emb)                   # no encoder run; emb.save(path) writes a file
        masks, scores, low_res = predictor.predict(box=...)  # that `vitrt segment --embedding` reads

The ViT classifier (torchvision's VisionTransformer checkpoints, dense or block-sparse from
`vitrt sparsify`):

    vit = vitrt.load_vit("vit_b_16-c867db91.pth")
    vit.classify(image, topk=5)                        # [(class index, probability), ...]
    logits = vit.logits([image1, image2])              # (2, 1000) float32
Errors raise vitrt.Error subclasses; bad arguments are also ValueError, unreadable files OSError.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

from . import _vitrt
from ._vitrt import CheckpointError, Embedding, Error, ImageError, InvalidArgument, IoError, Sam

__all__ = ["load", "random_sam", "read_image", "embed_images", "load_embedding", "Embedding", "Sam", "SamPredictor",
           "SamAutomaticMaskGenerator", "load_vit",
           "VitClassifier", "Error", "CheckpointError", "ImageError", "InvalidArgument", "IoError"]
__version__ = "0.1.0"


def load(checkpoint: str, device: str = "auto", config: Optional[str] = None, dtype: str = "fp32",
         decoder_dtype: Optional[str] = None) -> Sam:
    """Loads a SAM checkpoint (vit_b / vit_l / vit_h told from the tensor shapes).

    config: JSON with the settings of a non-standard model size (default: <checkpoint>.json if present).
    device: "auto" (the GPU when this build has the CUDA backend and one is present, else the CPU),
            "cpu" or "cuda".
    dtype: "fp32", or "bf16" on the GPU.
    decoder_dtype: the mask decoder's own dtype (default "fp32", whatever dtype is: dtype="bf16" then keeps
            the bf16 encoder's speed and meets the reference-agreement bar, see BENCHMARKS.md);
            "bf16" halves the decoder's time for bulk work at a small loss of agreement.
    """
    return _vitrt._load(str(checkpoint), "" if config is None else str(config), device, dtype,
                        "" if decoder_dtype is None else decoder_dtype)


def random_sam(model_type: str = "vit_b", seed: int = 0) -> Sam:
    """A SAM of the official size with random weights, for benchmarks and tests."""
    return _vitrt._random_sam(model_type, int(seed))


def read_image(path: str) -> np.ndarray:
    """Decodes a PNG or JPEG to an HxWx3 uint8 RGB array (as vitrt's command line reads it)."""
    return _vitrt._read_image(str(path))


def embed_images(sam_model: Sam, images: Any, batch_size: int = 16, image_format: str = "RGB") -> List[Embedding]:
    """The embeddings of a sequence of HxWx3 uint8 images (any sizes), batch_size images per encoder
    launch, in order; each the embedding SamPredictor.set_image would compute (up to the batch's
    summation order). For SamPredictor.set_embedding, or Embedding.save."""
    if not isinstance(sam_model, Sam):
        raise TypeError("embed_images needs a model from vitrt.load(...)")
    if image_format not in ("RGB", "BGR"):
        raise ValueError(f"image_format must be 'RGB' or 'BGR', is {image_format!r}")
    if isinstance(images, np.ndarray) and images.ndim == 3:
        raise ValueError("images must be a sequence of images (a list), not one HxWx3 array")
    ims = []
    for i, im in enumerate(images):
        arr = _rgb_u8(im, f"images[{i}]")
        if image_format != sam_model.image_format:
            arr = np.ascontiguousarray(arr[..., ::-1])
        ims.append(arr)
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    return _vitrt._embed_images(sam_model, ims, int(batch_size))


def load_embedding(path: str) -> Embedding:
    """Reads an embedding file written by `vitrt embed` or Embedding.save."""
    return _vitrt._load_embedding(str(path))


def load_vit(checkpoint: str, device: str = "auto", dtype: str = "fp32",
             num_heads: Optional[int] = None) -> "VitClassifier":
    """Loads a torchvision VisionTransformer state dict (.pth or .safetensors; vit_b_16 and the other
    sizes of the same architecture), or a block-sparse vitrt model file made by `vitrt sparsify`.

    device: "auto" (the GPU when this build has the CUDA backend and one is present), "cpu" or "cuda".
    dtype: "fp32", or "bf16" on the GPU.
    num_heads: attention heads (the tensors do not tell); default: <checkpoint>.json's "num_heads",
            else hidden size / 64 (every torchvision preset).
    """
    return VitClassifier(_vitrt._load_vit(str(checkpoint), device, dtype, 0 if num_heads is None else int(num_heads)))


def _rgb_u8(a: Any, name: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.ndim != 3 or arr.shape[2] != 3:
        raise ValueError(f"{name} must be an HxWx3 RGB array, got shape {arr.shape}")
    if arr.dtype != np.uint8:
        raise ValueError(f"{name} must be uint8 (0-255), got {arr.dtype}")
    return np.ascontiguousarray(arr)


class VitClassifier:
    """A loaded ViT classifier: torchvision's eval preprocessing (resize the shorter side to 256 for a
    224 model, Pillow's bilinear; centre crop; ImageNet normalisation) and the model, on RGB uint8
    images of any size."""

    def __init__(self, model: "_vitrt.Vit"):
        self.model = model

    @property
    def image_size(self) -> int:
        return self.model.image_size

    @property
    def num_classes(self) -> int:
        return self.model.num_classes

    @property
    def device(self) -> str:
        return self.model.device

    @property
    def num_bsr_linears(self) -> int:
        """How many of its linears are block-sparse (a `vitrt sparsify` model file); 0 when dense."""
        return self.model.num_bsr_linears

    def num_fused_mlps(self, batch: int) -> int:
        """How many of its block-sparse MLPs run as one fused CUDA kernel for batches of this size
        (0 on the CPU and where the two linears run instead)."""
        return self.model.num_fused_mlps(int(batch))

    def __repr__(self) -> str:
        return repr(self.model)

    def logits(self, images: Any, batch_size: int = 32) -> np.ndarray:
        """Logits (N, num_classes) float32 of one HxWx3 uint8 image (N = 1) or a sequence of them,
        run through the model batch_size images at a time."""
        if isinstance(images, np.ndarray) and images.ndim == 3:
            images = [images]
        ims = [_rgb_u8(im, f"images[{i}]") for i, im in enumerate(images)]
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        return _vitrt._vit_logits(self.model, ims, int(batch_size))

    def classify(self, image: Any, topk: int = 5) -> List[Tuple[int, float]]:
        """The topk (class index, softmax probability) pairs of one image, most probable first
        (ties: lower index first), as `vitrt classify` prints them."""
        return _vitrt._vit_classify(self.model, _rgb_u8(image, "image"), int(topk))


def _f32(a: Any, name: str) -> np.ndarray:
    try:
        return np.ascontiguousarray(np.asarray(a, dtype=np.float32))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be numeric: {e}") from None


class SamPredictor:
    """segment_anything.SamPredictor: embed an image once, then predict masks from prompts."""

    def __init__(self, sam_model: Sam) -> None:
        if not isinstance(sam_model, Sam):
            raise TypeError("SamPredictor needs a model from vitrt.load(...)")
        self.model = sam_model
        self._p = _vitrt._Predictor(sam_model)

    def set_image(self, image: np.ndarray, image_format: str = "RGB") -> None:
        """Computes the image embedding. image: HxWx3 uint8 in `image_format` ("RGB" or "BGR")."""
        if image_format not in ("RGB", "BGR"):
            raise ValueError(f"image_format must be 'RGB' or 'BGR', is {image_format!r}")
        image = np.asarray(image)
        if image.ndim != 3 or image.shape[2] != 3:
            raise ValueError(f"image must have shape (H, W, 3), got {image.shape}")
        if image.dtype != np.uint8:
            raise ValueError(f"image must be uint8, got {image.dtype}")
        if image_format != self.model.image_format:
            image = image[..., ::-1]
        self._p.set_image(np.ascontiguousarray(image))

    def set_embedding(self, embedding: Embedding) -> None:
        """Uses an embedding from vitrt.embed_images / vitrt.load_embedding instead of encoding an
        image (it must come from the same model)."""
        if not isinstance(embedding, Embedding):
            raise TypeError("set_embedding needs a vitrt.Embedding (from vitrt.embed_images or vitrt.load_embedding)")
        self._p.set_embedding(embedding)

    def predict(
        self,
        point_coords: Optional[np.ndarray] = None,
        point_labels: Optional[np.ndarray] = None,
        box: Optional[np.ndarray] = None,
        mask_input: Optional[np.ndarray] = None,
        multimask_output: bool = True,
        return_logits: bool = False,
    ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Masks for the prompts, in original-image pixel coordinates.

        point_coords (N, 2) x, y; point_labels (N,) 1 foreground / 0 background; box (4,) x0, y0,
        x1, y1; mask_input (1, 256, 256) low-res logits from an earlier call. Returns
        (masks (C, H, W) bool, or float32 logits with return_logits; iou_predictions (C,) float32;
        low_res_masks (C, 256, 256) float32), C = 3 with multimask_output, else 1.
        """
        if not self._p.is_image_set:
            raise RuntimeError("An image must be set with .set_image(...) before mask prediction.")
        coords = labels = None
        if point_coords is not None:
            if point_labels is None:
                raise ValueError("point_labels must be supplied if point_coords is supplied.")
            coords = _f32(point_coords, "point_coords")
            if coords.ndim != 2 or coords.shape[1] != 2:
                raise ValueError(f"point_coords must have shape (N, 2), got {coords.shape}")
            labels = np.asarray(point_labels)
            if labels.shape != (coords.shape[0],):
                raise ValueError(f"point_labels must have shape ({coords.shape[0]},), got {labels.shape}")
            labels = np.ascontiguousarray(labels, dtype=np.int32)
        if box is not None:
            box = _f32(box, "box")
            if box.size != 4:
                raise ValueError(f"box must have 4 values (x0, y0, x1, y1), got shape {box.shape}")
            box = box.reshape(4)
        if mask_input is not None:
            mask_input = _f32(mask_input, "mask_input")
        return self._p.predict(coords, labels, box, mask_input, bool(multimask_output), bool(return_logits))

    def get_image_embedding(self) -> np.ndarray:
        """The image embedding, float32 (1, 256, 64, 64)."""
        if not self._p.is_image_set:
            raise RuntimeError("An image must be set with .set_image(...) to generate an embedding.")
        return self._p.get_image_embedding()

    def reset_image(self) -> None:
        self._p.reset_image()

    @property
    def is_image_set(self) -> bool:
        return self._p.is_image_set

    @property
    def original_size(self) -> Tuple[int, int]:
        return self._p.original_size

    @property
    def input_size(self) -> Tuple[int, int]:
        return self._p.input_size

    @property
    def features(self) -> np.ndarray:
        return self.get_image_embedding()


class SamAutomaticMaskGenerator:
    """segment_anything.SamAutomaticMaskGenerator: masks for everything in an image."""

    def __init__(
        self,
        model: Sam,
        points_per_side: Optional[int] = 32,
        points_per_batch: int = 64,
        pred_iou_thresh: float = 0.88,
        stability_score_thresh: float = 0.95,
        stability_score_offset: float = 1.0,
        box_nms_thresh: float = 0.7,
        crop_n_layers: int = 0,
        crop_nms_thresh: float = 0.7,
        crop_overlap_ratio: float = 512 / 1500,
        crop_n_points_downscale_factor: int = 1,
        point_grids: Optional[List[np.ndarray]] = None,
        min_mask_region_area: int = 0,
        output_mode: str = "binary_mask",
    ) -> None:
        if not getattr(_vitrt, "HAVE_AMG", False):
            raise NotImplementedError("this vitrt build has no automatic mask generator")
        if (points_per_side is None) == (point_grids is None):
            raise ValueError("Exactly one of points_per_side or point_grid must be provided.")
        grids = None if point_grids is None else [np.asarray(g, dtype=np.float64).tolist() for g in point_grids]
        self._g = _vitrt._MaskGenerator(
            model, points_per_side, int(points_per_batch), float(pred_iou_thresh), float(stability_score_thresh),
            float(stability_score_offset), float(box_nms_thresh), int(crop_n_layers), float(crop_nms_thresh),
            float(crop_overlap_ratio), int(crop_n_points_downscale_factor), grids, int(min_mask_region_area),
            output_mode)

    def generate(self, image: np.ndarray) -> List[dict]:
        """One dict per mask: segmentation, area, bbox (XYWH), predicted_iou, point_coords,
        stability_score, crop_box — as the reference returns them. image: HxWx3 uint8 RGB."""
        image = np.asarray(image)
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise ValueError(f"image must be an (H, W, 3) uint8 array, got {image.shape} {image.dtype}")
        return self._g.generate(np.ascontiguousarray(image))
