//! The codec side: what the header of an encoded stream says (format, size, pixel layout), and
//! the whole decode, converted to the requested pixel format as Pillow converts (the ONNX
//! reference is `np.array(PIL.Image.open(...))`, Grayscale through `convert("L")`).
//!
//! Pillow's conversions, which this module reproduces for every layout the `image` crate
//! decodes to:
//! - RGB from RGB is the decoded pixels; from RGBA (and a palette with transparency, which the
//!   `image` crate expands to RGBA) the alpha channel is dropped, not composited
//!   (`rgba2rgb`); from L and LA the gray value is replicated (`l2rgb`, `la2rgb`).
//! - L from RGB(A) is `(R*19595 + G*38470 + B*7471 + 0x8000) >> 16` (`rgb2l`, ITU-R 601-2 in
//!   16-bit fixed point; alpha ignored); from a palette the same formula on the palette colour
//!   (`p2l`), which is what expanding the palette first gives; from LA the gray channel.
//! - 16-bit colour and LA samples keep their high byte (Pillow unpacks `RGB;16B`/`LA;16B` that
//!   way); 16-bit gray opens as `I;16`, whose conversion to L or RGB clips at 255 (`I16_L`,
//!   `I16_RGB`).
//! - BGR is RGB with its channels reversed.
//!
//! Floating-point images (32-bit float TIFF) are refused: Pillow opens them as mode `F`, which
//! has no 8-bit RGB form in the reference.
//!
//! Baseline JPEG streams go through [`crate::jpeg`] (libjpeg-turbo's arithmetic, bit-exact with
//! the reference); every other stream, and a JPEG outside that subset, through the `image`
//! crate.

use std::io::Cursor;

use image::{ColorType, DynamicImage, ImageDecoder, ImageFormat, ImageReader};

/// Largest decoded image served, in pixels (64 Mi: a 8192 × 8192 image).
pub const MAX_PIXELS: u64 = 64 << 20;
/// Largest decoded image served, in bytes of the decoder's own layout (256 MiB; a 16-bit RGBA
/// image of 32 Mi pixels): the decode runs inside the plugin's sandbox (1 GiB by default) and
/// the output is copied once more on its way out.
pub const MAX_DECODED_BYTES: u64 = 256 << 20;

/// The requested layout of the output (attribute `pixel_format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PixelFormat {
    Rgb,
    Bgr,
    Gray,
}

impl PixelFormat {
    /// The attribute's spelling (`RGB`, `BGR`, `Grayscale`), exactly as ONNX writes it.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "RGB" => Some(PixelFormat::Rgb),
            "BGR" => Some(PixelFormat::Bgr),
            "Grayscale" => Some(PixelFormat::Gray),
            _ => None,
        }
    }
    /// The code the parameter block carries.
    pub fn code(self) -> u32 {
        self as u32
    }
    pub fn from_code(c: u32) -> Option<Self> {
        [PixelFormat::Rgb, PixelFormat::Bgr, PixelFormat::Gray]
            .into_iter()
            .find(|p| p.code() == c)
    }
    /// Channels of the output's last axis.
    pub fn channels(self) -> u64 {
        match self {
            PixelFormat::Gray => 1,
            _ => 3,
        }
    }
}

/// The formats served.
pub const FORMATS: [ImageFormat; 6] = [
    ImageFormat::Png,
    ImageFormat::Jpeg,
    ImageFormat::Bmp,
    ImageFormat::Tiff,
    ImageFormat::WebP,
    ImageFormat::Pnm,
];

/// Why a stream is not decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A format ONNX names that this plugin does not decode (JPEG 2000): not served.
    NotServed(String),
    /// Not an image this plugin knows, corrupt, or over the bounds: an invalid input.
    Invalid(String),
}

/// What a stream's header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The stream's format, by name (`PNG`, `JPEG 2000`…).
    pub format: String,
    pub width: u32,
    pub height: u32,
    pub color: ColorType,
}

/// Whether `b` starts like JPEG 2000 (a JP2 file's signature box, or a bare J2K codestream).
pub fn is_jpeg2000(b: &[u8]) -> bool {
    b.starts_with(&[
        0, 0, 0, 0x0C, b'j', b'P', b' ', b' ', 0x0D, 0x0A, 0x87, 0x0A,
    ]) || b.starts_with(&[0xFF, 0x4F, 0xFF, 0x51])
}

fn format_name(f: ImageFormat) -> String {
    match f {
        ImageFormat::Png => "PNG".into(),
        ImageFormat::Jpeg => "JPEG".into(),
        ImageFormat::Bmp => "BMP".into(),
        ImageFormat::Tiff => "TIFF".into(),
        ImageFormat::WebP => "WebP".into(),
        ImageFormat::Pnm => "PNM".into(),
        other => format!("{other:?}").to_uppercase(),
    }
}

/// A reader of an in-memory stream.
type Reader<'a> = ImageReader<Cursor<&'a [u8]>>;

fn reader(bytes: &[u8]) -> Result<(Reader<'_>, ImageFormat), Refusal> {
    let served = || {
        FORMATS
            .iter()
            .map(|f| format_name(*f))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let format = image::guess_format(bytes).map_err(|_| {
        Refusal::Invalid(format!(
            "the stream ({} bytes) is not an image of a served format ({})",
            bytes.len(),
            served()
        ))
    })?;
    if !FORMATS.contains(&format) {
        return Err(Refusal::Invalid(format!(
            "the stream is a {} image, not one of the served formats ({})",
            format_name(format),
            served()
        )));
    }
    let mut r = ImageReader::with_format(Cursor::new(bytes), format);
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(MAX_DECODED_BYTES + (64 << 20));
    r.limits(limits);
    Ok((r, format))
}

/// Reads the header of `bytes` only: format, size and pixel layout, checked against
/// [`MAX_PIXELS`] and [`MAX_DECODED_BYTES`].
pub fn header(bytes: &[u8]) -> Result<Header, Refusal> {
    if is_jpeg2000(bytes) {
        let h = jpeg2000::header(&jpeg2000::image(bytes)?)?;
        check(&h)?;
        return Ok(h);
    }
    let (r, format) = reader(bytes)?;
    let name = format_name(format);
    let dec = r
        .into_decoder()
        .map_err(|e| Refusal::Invalid(format!("the {name} stream's header is invalid: {e}")))?;
    let (width, height) = dec.dimensions();
    let color = dec.color_type();
    let h = Header {
        format: format_name(format),
        width,
        height,
        color,
    };
    check(&h)?;
    Ok(h)
}

fn check(h: &Header) -> Result<(), Refusal> {
    let name = &h.format;
    let pixels = h.width as u64 * h.height as u64;
    if pixels == 0 {
        return Err(Refusal::Invalid(format!(
            "the {name} image is empty ({} x {})",
            h.width, h.height
        )));
    }
    if pixels > MAX_PIXELS {
        return Err(Refusal::Invalid(format!(
            "the {name} image of {} x {} = {pixels} pixels exceeds the bound of {MAX_PIXELS} \
             pixels (64 Mi)",
            h.width, h.height
        )));
    }
    let bytes = pixels * h.color.bytes_per_pixel() as u64;
    if bytes > MAX_DECODED_BYTES {
        return Err(Refusal::Invalid(format!(
            "the {name} image of {} x {} pixels decodes to {bytes} bytes ({:?}), over the bound \
             of {MAX_DECODED_BYTES} bytes (256 MiB)",
            h.width, h.height, h.color
        )));
    }
    if matches!(h.color, ColorType::Rgb32F | ColorType::Rgba32F) {
        return Err(Refusal::Invalid(format!(
            "the {name} image has floating-point samples ({:?}); only 8- and 16-bit images \
             convert to uint8 pixels",
            h.color
        )));
    }
    Ok(())
}

/// Pillow's `L` of an RGB pixel.
#[inline]
pub fn luma(r: u8, g: u8, b: u8) -> u8 {
    ((r as u32 * 19595 + g as u32 * 38470 + b as u32 * 7471 + 0x8000) >> 16) as u8
}

/// Decodes `bytes` whole and converts it to `pf`: `height × width × channels` bytes, row-major.
/// Returns the header too (the caller checks it against the plan).
pub fn decode(bytes: &[u8], pf: PixelFormat) -> Result<(Header, Vec<u8>), Refusal> {
    let h = header(bytes)?;
    if is_jpeg2000(bytes) {
        let img = jpeg2000::decode(bytes, &h)?;
        let out = convert(&img, pf).ok_or_else(|| {
            Refusal::Invalid("the JPEG 2000 image's pixel layout has no uint8 form".into())
        })?;
        return Ok((h, out));
    }
    let (r, format) = reader(bytes)?;
    let name = format_name(format);
    // JPEG: libjpeg-turbo's arithmetic where the stream is in its subset, else the image crate
    let exact = (format == ImageFormat::Jpeg)
        .then(|| crate::jpeg::decode(bytes))
        .flatten()
        .and_then(|d| {
            let (w, h) = (d.width as u32, d.height as u32);
            match d.channels {
                1 => image::GrayImage::from_raw(w, h, d.data).map(DynamicImage::ImageLuma8),
                _ => image::RgbImage::from_raw(w, h, d.data).map(DynamicImage::ImageRgb8),
            }
        })
        .filter(|img| (img.width(), img.height()) == (h.width, h.height));
    let img = match exact {
        Some(img) => img,
        None => r
            .decode()
            .map_err(|e| Refusal::Invalid(format!("the {name} stream does not decode: {e}")))?,
    };
    let out = convert(&img, pf).ok_or_else(|| {
        Refusal::Invalid(format!(
            "the {name} image's pixel layout {:?} has no uint8 form",
            img.color()
        ))
    })?;
    Ok((h, out))
}

/// The samples of one decoded pixel layout, read as Pillow converts them.
enum Px<'a> {
    /// Gray samples, `stride` apart (LA: 2).
    Gray8(&'a [u8], usize),
    /// 8-bit colour, `stride` samples per pixel (RGB: 3, RGBA: 4).
    Rgb8(&'a [u8], usize),
    /// 16-bit gray (`I;16`), clipped at 255; `stride` samples per pixel.
    Gray16Clip(&'a [u16], usize),
    /// 16-bit gray with alpha (`LA;16B`): the high byte.
    Gray16High(&'a [u16], usize),
    /// 16-bit colour: the high byte of each sample.
    Rgb16(&'a [u16], usize),
}

/// Converts a decoded image to `pf` (`None` for a layout with no uint8 form: floats).
pub fn convert(img: &DynamicImage, pf: PixelFormat) -> Option<Vec<u8>> {
    let px = match img {
        DynamicImage::ImageLuma8(b) => Px::Gray8(b.as_raw(), 1),
        DynamicImage::ImageLumaA8(b) => Px::Gray8(b.as_raw(), 2),
        DynamicImage::ImageRgb8(b) => Px::Rgb8(b.as_raw(), 3),
        DynamicImage::ImageRgba8(b) => Px::Rgb8(b.as_raw(), 4),
        DynamicImage::ImageLuma16(b) => Px::Gray16Clip(b.as_raw(), 1),
        DynamicImage::ImageLumaA16(b) => Px::Gray16High(b.as_raw(), 2),
        DynamicImage::ImageRgb16(b) => Px::Rgb16(b.as_raw(), 3),
        DynamicImage::ImageRgba16(b) => Px::Rgb16(b.as_raw(), 4),
        _ => return None,
    };
    let n = img.width() as usize * img.height() as usize;
    let mut out = Vec::with_capacity(n * pf.channels() as usize);
    let mut put = |r: u8, g: u8, b: u8| match pf {
        PixelFormat::Rgb => out.extend_from_slice(&[r, g, b]),
        PixelFormat::Bgr => out.extend_from_slice(&[b, g, r]),
        PixelFormat::Gray => out.push(luma(r, g, b)),
    };
    // Gray sources stay gray under Grayscale (Pillow's L→L and LA→L copy, and luma(v, v, v) is
    // v for every v: 19595 + 38470 + 7471 = 65536).
    match px {
        Px::Gray8(s, k) => s.iter().step_by(k).for_each(|&v| put(v, v, v)),
        Px::Rgb8(s, k) => s.chunks_exact(k).for_each(|p| put(p[0], p[1], p[2])),
        Px::Gray16Clip(s, k) => s.iter().step_by(k).for_each(|&v| {
            let v = v.min(255) as u8;
            put(v, v, v)
        }),
        Px::Gray16High(s, k) => s.iter().step_by(k).for_each(|&v| {
            let v = (v >> 8) as u8;
            put(v, v, v)
        }),
        Px::Rgb16(s, k) => s
            .chunks_exact(k)
            .for_each(|p| put((p[0] >> 8) as u8, (p[1] >> 8) as u8, (p[2] >> 8) as u8)),
    }
    debug_assert_eq!(out.len(), n * pf.channels() as usize);
    Some(out)
}

/// JPEG 2000 (JP2 files and bare codestreams) through `hayro-jpeg2000`, a pure-Rust decoder:
/// gray, RGB and either with alpha, as 8-bit samples (deeper images scaled to 8 bits by the
/// decoder); CMYK and other colour spaces are refused.
mod jpeg2000 {
    use super::{Header, Refusal};
    use hayro_jpeg2000::{ColorSpace, DecodeSettings, DecoderContext, Image};
    use image::{ColorType, DynamicImage};

    const NAME: &str = "JPEG 2000";

    pub fn image(bytes: &[u8]) -> Result<Image<'_>, Refusal> {
        Image::new(bytes, &DecodeSettings::default())
            .map_err(|e| Refusal::Invalid(format!("the {NAME} stream's header is invalid: {e}")))
    }

    pub fn header(img: &Image<'_>) -> Result<Header, Refusal> {
        let color = match (img.color_space().num_channels(), img.has_alpha()) {
            (1, false) => ColorType::L8,
            (1, true) => ColorType::La8,
            (3, false) if !matches!(img.color_space(), ColorSpace::CMYK) => ColorType::Rgb8,
            (3, true) => ColorType::Rgba8,
            (n, alpha) => {
                return Err(Refusal::Invalid(format!(
                    "the {NAME} image's colour space {} with {n} channels{} has no served \
                     uint8 form",
                    match img.color_space() {
                        ColorSpace::CMYK => "CMYK",
                        ColorSpace::Icc { .. } => "ICC",
                        _ => "unknown",
                    },
                    if alpha { " and alpha" } else { "" }
                )));
            }
        };
        Ok(Header {
            format: NAME.into(),
            width: img.width(),
            height: img.height(),
            color,
        })
    }

    /// The whole image (its header already checked).
    pub fn decode(bytes: &[u8], h: &Header) -> Result<DynamicImage, Refusal> {
        let img = image(bytes)?;
        let mut ctx = DecoderContext::default();
        let decoded = img
            .decode(&mut ctx)
            .map_err(|e| Refusal::Invalid(format!("the {NAME} stream does not decode: {e}")))?;
        let data = decoded.data_u8();
        let (w, ht) = (h.width, h.height);
        let wrong = || {
            Refusal::Invalid(format!(
                "the {NAME} stream decoded to {} bytes, not {w} x {ht} {:?} pixels",
                data.len(),
                h.color
            ))
        };
        let img = match h.color {
            ColorType::L8 => {
                image::GrayImage::from_raw(w, ht, data.clone()).map(DynamicImage::ImageLuma8)
            }
            ColorType::La8 => {
                image::GrayAlphaImage::from_raw(w, ht, data.clone()).map(DynamicImage::ImageLumaA8)
            }
            ColorType::Rgb8 => {
                image::RgbImage::from_raw(w, ht, data.clone()).map(DynamicImage::ImageRgb8)
            }
            _ => image::RgbaImage::from_raw(w, ht, data.clone()).map(DynamicImage::ImageRgba8),
        };
        img.ok_or_else(wrong)
    }
}
