"""Regenerates the test images and Pillow's decodes of them (the ONNX reference decodes with
Pillow: `np.array(PIL.Image.open(f))`, Grayscale through `convert("L")`).

    python gen.py        # needs Pillow and numpy; written with Pillow 13.0.0

For every `NAME.EXT` it writes `NAME.EXT.rgb` (`convert("RGB")`, H*W*3 bytes) and
`NAME.EXT.gray` (`convert("L")`, H*W bytes), and `sizes.txt` (`NAME.EXT H W`). For an image
that opens as RGB these are exactly the reference's RGB and Grayscale outputs; for the other
modes (RGBA, LA, L, P, I;16, 1) they are what Pillow converts them to, which the plugin
reproduces so the output has the shape `pixel_format` asks for.
"""
import io
from pathlib import Path

import numpy as np
import PIL
from PIL import Image

HERE = Path(__file__).parent
rng = np.random.default_rng(20261201)
H, W = 5, 7


def u8(*shape):
    return rng.integers(0, 256, size=shape, dtype=np.uint8)


rgb = Image.fromarray(u8(H, W, 3), "RGB")
rgba = Image.fromarray(u8(H, W, 4), "RGBA")
la = Image.fromarray(u8(H, W, 2), "LA")
gray = Image.fromarray(u8(H, W), "L")
pal = Image.fromarray(rng.integers(0, 6, size=(H, W), dtype=np.uint8), "P")
pal.putpalette(list(u8(6 * 3)))
pal_t = pal.copy()
pal_t.info["transparency"] = 2
i16 = Image.fromarray(np.array([[0, 1, 200, 254, 255, 256, 65535]] * H, dtype=np.uint16))
bits = Image.fromarray(u8(H, W)).convert("1")
noise = Image.fromarray(u8(29, 37, 3), "RGB")
yy, xx = np.mgrid[0:29, 0:37]
smooth = Image.fromarray(
    np.stack([xx * 7, yy * 8, (xx + yy) * 4], axis=2).clip(0, 255).astype(np.uint8), "RGB"
)

images = {
    "rgb.png": (rgb, {}),
    "rgba.png": (rgba, {}),
    "la.png": (la, {}),
    "gray.png": (gray, {}),
    "pal.png": (pal, {}),
    "pal_trns.png": (pal_t, {"transparency": 2}),
    "gray16.png": (i16, {}),
    "rgb.bmp": (rgb, {}),
    "pal.bmp": (pal, {}),
    "gray.bmp": (gray, {}),
    "rgb.tiff": (rgb, {}),
    "rgba.tiff": (rgba, {}),
    "gray.tiff": (gray, {}),
    "rgb.ppm": (rgb, {}),
    "gray.pgm": (gray, {}),
    "bits.pbm": (bits, {}),
    "rgb_lossless.webp": (rgb, {"lossless": True}),
    "rgba_lossless.webp": (rgba, {"lossless": True}),
    "rgb_lossy.webp": (rgb, {}),
    "rgb.jpeg": (rgb, {}),
    "gray.jpeg": (gray, {}),
    # JPEG sampling layouts, qualities and restart markers (decoded bit-exactly), progressive
    # (decoded by zune-jpeg: may differ by 1-2)
    "noise444_q95.jpeg": (noise, {"subsampling": 0, "quality": 95}),
    "noise422.jpeg": (noise, {"subsampling": 1}),
    "noise420_q100.jpeg": (noise, {"subsampling": 2, "quality": 100}),
    "smooth420.jpeg": (smooth, {}),
    "smooth420_restart.jpeg": (smooth, {"restart_marker_blocks": 3}),
    "graynoise_q90.jpeg": (noise.convert("L"), {"quality": 90}),
    "smooth_progressive.jpeg": (smooth, {"progressive": True}),
}
fmt = {"png": "PNG", "bmp": "BMP", "tiff": "TIFF", "ppm": "PPM", "pgm": "PPM", "pbm": "PPM",
       "webp": "WEBP", "jpeg": "JPEG"}
sizes = []
for name, (im, kw) in images.items():
    with io.BytesIO() as f:
        im.save(f, format=fmt[name.rsplit(".", 1)[1]], **kw)
        data = f.getvalue()
    (HERE / name).write_bytes(data)
    back = Image.open(io.BytesIO(data))
    (HERE / f"{name}.rgb").write_bytes(np.array(back.convert("RGB")).tobytes())
    back = Image.open(io.BytesIO(data))
    (HERE / f"{name}.gray").write_bytes(np.array(back.convert("L")).tobytes())
    sizes.append(f"{name} {back.height} {back.width} {back.mode}")
(HERE / "sizes.txt").write_text("\n".join(sizes) + "\n")
print(f"Pillow {PIL.__version__}:", *sizes, sep="\n  ")
