//! Baseline JPEG decoded exactly as libjpeg-turbo decodes it with its default settings (the
//! ONNX reference's Pillow): the integer "islow" IDCT (`jidctint.c`), fancy (triangle) chroma
//! upsampling (`jdsample.c`: h2v1, h2v2) and its fixed-point YCbCr → RGB tables (`jdcolor.c`).
//! Only baseline/extended Huffman 8-bit streams with 1 component, or 3 components (YCbCr) whose
//! chroma is 1×1 and luma 1×1, 2×1 or 2×2, are decoded here; `None` means "not this subset" and
//! the caller falls back to another decoder.

/// A decoded image: `width × height` pixels of `channels` (1: gray, 3: RGB) bytes.
pub struct Decoded {
    pub width: usize,
    pub height: usize,
    pub channels: usize,
    pub data: Vec<u8>,
}

const ZIGZAG: [usize; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20,
    13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59,
    52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
];

#[derive(Clone, Default)]
struct Huffman {
    maxcode: [i32; 18],
    valptr: [i32; 17],
    mincode: [i32; 17],
    vals: Vec<u8>,
}

impl Huffman {
    fn new(counts: &[u8; 16], vals: Vec<u8>) -> Option<Huffman> {
        let mut h = Huffman {
            maxcode: [-1; 18],
            vals,
            ..Huffman::default()
        };
        let (mut code, mut k) = (0i32, 0i32);
        for l in 1..=16 {
            let n = counts[l - 1] as i32;
            h.valptr[l] = k;
            h.mincode[l] = code;
            code += n;
            k += n;
            h.maxcode[l] = if n > 0 { code - 1 } else { -1 };
            code <<= 1;
        }
        h.maxcode[17] = i32::MAX;
        (k as usize <= h.vals.len()).then_some(h)
    }
}

struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
    acc: u32,
    n: u32,
}

impl<'a> Bits<'a> {
    fn bit(&mut self) -> u32 {
        if self.n == 0 {
            let mut b = 0u32;
            if self.pos < self.data.len() {
                let c = self.data[self.pos];
                if c == 0xFF {
                    let next = self.data.get(self.pos + 1).copied().unwrap_or(0xD9);
                    if next == 0 {
                        self.pos += 2;
                        b = 0xFF;
                    }
                    // a marker: zeros from here on (as libjpeg does)
                } else {
                    self.pos += 1;
                    b = c as u32;
                }
            }
            self.acc = b;
            self.n = 8;
        }
        self.n -= 1;
        (self.acc >> self.n) & 1
    }
    fn bits(&mut self, k: u32) -> i32 {
        let mut v = 0i32;
        for _ in 0..k {
            v = (v << 1) | self.bit() as i32;
        }
        v
    }
    fn decode(&mut self, h: &Huffman) -> Option<u8> {
        let mut code = self.bit() as i32;
        let mut l = 1;
        while code > h.maxcode[l] {
            l += 1;
            if l > 16 {
                return None;
            }
            code = (code << 1) | self.bit() as i32;
        }
        h.vals
            .get((h.valptr[l] + code - h.mincode[l]) as usize)
            .copied()
    }
    fn receive_extend(&mut self, s: u32) -> i32 {
        if s == 0 {
            return 0;
        }
        let v = self.bits(s);
        if v < (1 << (s - 1)) {
            v - (1 << s) + 1
        } else {
            v
        }
    }
    /// Skips to after the next RSTn marker.
    fn restart(&mut self) -> Option<()> {
        self.n = 0;
        while self.pos + 1 < self.data.len() {
            if self.data[self.pos] == 0xFF && (0xD0..=0xD7).contains(&self.data[self.pos + 1]) {
                self.pos += 2;
                return Some(());
            }
            self.pos += 1;
        }
        None
    }
}

struct Comp {
    id: u8,
    h: usize,
    v: usize,
    tq: usize,
    bw: usize,
    bh: usize,
    /// Quantized coefficients, natural order, 16-bit as libjpeg's JCOEF.
    coefs: Vec<i16>,
}

fn be16(d: &[u8], i: usize) -> Option<usize> {
    Some(((*d.get(i)? as usize) << 8) | *d.get(i + 1)? as usize)
}

/// Decodes `data` if it is in the subset described above.
pub fn decode(data: &[u8]) -> Option<Decoded> {
    if !data.starts_with(&[0xFF, 0xD8]) {
        return None;
    }
    let mut qt = [[0i32; 64]; 4];
    let mut dc: [Huffman; 4] = Default::default();
    let mut ac: [Huffman; 4] = Default::default();
    let mut comps: Vec<Comp> = Vec::new();
    let (mut width, mut height, mut restart) = (0usize, 0usize, 0usize);
    let (mut hmax, mut vmax, mut mcux, mut mcuy) = (1, 1, 0, 0);
    let mut i = 2;
    let mut scanned = false;
    loop {
        if *data.get(i)? != 0xFF {
            return None;
        }
        let m = *data.get(i + 1)?;
        if m == 0xFF {
            i += 1;
            continue;
        }
        if m == 0xD9 {
            break;
        }
        let len = be16(data, i + 2)?;
        let seg = data.get(i + 4..i + 2 + len)?;
        match m {
            0xDB => {
                let mut p = 0;
                while p < seg.len() {
                    let (pq, tq) = (seg[p] >> 4, (seg[p] & 15) as usize);
                    if pq != 0 || tq > 3 {
                        return None;
                    }
                    for k in 0..64 {
                        qt[tq][ZIGZAG[k]] = *seg.get(p + 1 + k)? as i32;
                    }
                    p += 65;
                }
            }
            0xC4 => {
                let mut p = 0;
                while p < seg.len() {
                    let (tc, th) = (seg[p] >> 4, (seg[p] & 15) as usize);
                    let counts: [u8; 16] = seg.get(p + 1..p + 17)?.try_into().ok()?;
                    let n: usize = counts.iter().map(|c| *c as usize).sum();
                    let vals = seg.get(p + 17..p + 17 + n)?.to_vec();
                    let h = Huffman::new(&counts, vals)?;
                    match (tc, th) {
                        (0, 0..=3) => dc[th] = h,
                        (1, 0..=3) => ac[th] = h,
                        _ => return None,
                    }
                    p += 17 + n;
                }
            }
            0xDD => restart = be16(seg, 0)?,
            0xC0 | 0xC1 => {
                if *seg.first()? != 8 || !comps.is_empty() {
                    return None;
                }
                height = be16(seg, 1)?;
                width = be16(seg, 3)?;
                let n = *seg.get(5)? as usize;
                if width == 0 || height == 0 || !(n == 1 || n == 3) {
                    return None;
                }
                for c in 0..n {
                    let s = seg.get(6 + 3 * c..9 + 3 * c)?;
                    comps.push(Comp {
                        id: s[0],
                        h: (s[1] >> 4) as usize,
                        v: (s[1] & 15) as usize,
                        tq: (s[2] & 3) as usize,
                        bw: 0,
                        bh: 0,
                        coefs: Vec::new(),
                    });
                }
                hmax = comps.iter().map(|c| c.h).max()?;
                vmax = comps.iter().map(|c| c.v).max()?;
                if n == 1 {
                    // a single component is never interleaved: its own 8×8 blocks
                    comps[0].h = 1;
                    comps[0].v = 1;
                    hmax = 1;
                    vmax = 1;
                } else {
                    let ok_luma = matches!((comps[0].h, comps[0].v), (1, 1) | (2, 1) | (2, 2));
                    let ok_chroma = comps[1..].iter().all(|c| (c.h, c.v) == (1, 1));
                    // components named R, G, B: libjpeg may read them as RGB, not YCbCr
                    if comps.iter().map(|c| c.id).eq([b'R', b'G', b'B']) {
                        return None;
                    }
                    if !ok_luma || !ok_chroma {
                        return None;
                    }
                }
                mcux = width.div_ceil(8 * hmax);
                mcuy = height.div_ceil(8 * vmax);
                for c in comps.iter_mut() {
                    c.bw = mcux * c.h;
                    c.bh = mcuy * c.v;
                    c.coefs = vec![0; c.bw * c.bh * 64];
                }
            }
            0xC2 | 0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF => return None,
            // Adobe: a colour transform libjpeg may read differently
            0xEE => return None,
            0xDA => {
                if comps.is_empty() {
                    return None;
                }
                let ns = *seg.first()? as usize;
                let mut sc = Vec::new();
                for k in 0..ns {
                    let (cid, t) = (*seg.get(1 + 2 * k)?, *seg.get(2 + 2 * k)?);
                    let ci = comps.iter().position(|c| c.id == cid)?;
                    let (td, ta) = ((t >> 4) as usize, (t & 15) as usize);
                    if td > 3 || ta > 3 {
                        return None;
                    }
                    sc.push((ci, td, ta));
                }
                let p = 1 + 2 * ns;
                if seg.get(p..p + 3)? != [0, 63, 0] {
                    return None;
                }
                let end = scan(
                    &data[i + 2 + len..],
                    &mut comps,
                    &sc,
                    &dc,
                    &ac,
                    restart,
                    (mcux, mcuy, width, height, hmax, vmax),
                )?;
                scanned = true;
                i += 2 + len + end;
                continue;
            }
            _ => {}
        }
        i += 2 + len;
    }
    if !scanned {
        return None;
    }
    // IDCT every block into each component's plane (the coefficients are dropped as it goes)
    let planes: Vec<Vec<u8>> = comps
        .iter_mut()
        .map(|c| {
            let stride = c.bw * 8;
            let mut plane = vec![0u8; stride * c.bh * 8];
            for by in 0..c.bh {
                for bx in 0..c.bw {
                    let b = &c.coefs[(by * c.bw + bx) * 64..][..64];
                    idct_islow(b, &qt[c.tq], &mut plane[by * 8 * stride + bx * 8..], stride);
                }
            }
            c.coefs = Vec::new();
            plane
        })
        .collect();
    let mut out;
    if comps.len() == 1 {
        let stride = comps[0].bw * 8;
        out = Vec::with_capacity(width * height);
        for y in 0..height {
            out.extend_from_slice(&planes[0][y * stride..y * stride + width]);
        }
        return Some(Decoded {
            width,
            height,
            channels: 1,
            data: out,
        });
    }
    // chroma to full size
    let (cw, ch) = (width.div_ceil(hmax), height.div_ceil(vmax));
    if (hmax > 1 && cw < 2) || (vmax > 1 && ch < 2) {
        return None;
    }
    let up: Vec<Vec<u8>> = (1..3)
        .map(|k| upsample(&planes[k], comps[k].bw * 8, cw, ch, hmax, vmax))
        .collect();
    let ystride = comps[0].bw * 8;
    let ustride = cw * hmax;
    out = Vec::with_capacity(width * height * 3);
    let t = Tables::new();
    for y in 0..height {
        for x in 0..width {
            let yy = planes[0][y * ystride + x] as i32;
            let cb = up[0][y * ustride + x] as usize;
            let cr = up[1][y * ustride + x] as usize;
            out.push((yy + t.cr_r[cr]).clamp(0, 255) as u8);
            out.push((yy + ((t.cb_g[cb] + t.cr_g[cr]) >> 16)).clamp(0, 255) as u8);
            out.push((yy + t.cb_b[cb]).clamp(0, 255) as u8);
        }
    }
    Some(Decoded {
        width,
        height,
        channels: 3,
        data: out,
    })
}

/// Decodes one sequential scan; returns the bytes consumed after the SOS segment.
fn scan(
    d: &[u8],
    comps: &mut [Comp],
    sc: &[(usize, usize, usize)],
    dc: &[Huffman; 4],
    ac: &[Huffman; 4],
    restart: usize,
    (mcux, mcuy, width, height, hmax, vmax): (usize, usize, usize, usize, usize, usize),
) -> Option<usize> {
    let mut b = Bits {
        data: d,
        pos: 0,
        acc: 0,
        n: 0,
    };
    let mut pred = vec![0i32; sc.len()];
    let block = |b: &mut Bits, k: usize, pred: &mut [i32], comps: &mut [Comp], bx, by| {
        let (ci, td, ta) = sc[k];
        let c = &mut comps[ci];
        let blk = &mut c.coefs[(by * c.bw + bx) * 64..][..64];
        let s = b.decode(&dc[td])? as u32;
        if s > 11 {
            return None;
        }
        pred[k] = pred[k].wrapping_add(b.receive_extend(s));
        // libjpeg stores coefficients as 16-bit JCOEF
        blk[0] = pred[k] as i16;
        let mut z = 1;
        while z < 64 {
            let rs = b.decode(&ac[ta])?;
            let (r, s) = ((rs >> 4) as usize, (rs & 15) as u32);
            if s == 0 {
                if r == 15 {
                    z += 16;
                    continue;
                }
                break;
            }
            z += r;
            if z > 63 {
                return None;
            }
            blk[ZIGZAG[z]] = b.receive_extend(s) as i16;
            z += 1;
        }
        Some(())
    };
    // units: the blocks of the one component, or the MCUs, in raster order
    let (uw, uh) = if sc.len() == 1 {
        let c = &comps[sc[0].0];
        let bw = (width * c.h).div_ceil(hmax).div_ceil(8);
        let bh = (height * c.v).div_ceil(vmax).div_ceil(8);
        (bw, bh)
    } else {
        (mcux, mcuy)
    };
    for n in 0..uw * uh {
        let (ux, uy) = (n % uw, n / uw);
        if restart > 0 && n > 0 && n % restart == 0 {
            b.restart()?;
            pred.iter_mut().for_each(|p| *p = 0);
        }
        if sc.len() == 1 {
            block(&mut b, 0, &mut pred, comps, ux, uy)?;
        } else {
            for k in 0..sc.len() {
                let (h, v) = (comps[sc[k].0].h, comps[sc[k].0].v);
                for y in 0..v {
                    for x in 0..h {
                        block(&mut b, k, &mut pred, comps, ux * h + x, uy * v + y)?;
                    }
                }
            }
        }
    }
    // find the next marker (not RSTn, not a stuffed 0xFF00)
    let mut p = b.pos;
    while p + 1 < d.len() {
        if d[p] == 0xFF && d[p + 1] != 0 && !(0xD0..=0xD7).contains(&d[p + 1]) {
            return Some(p);
        }
        p += 1;
    }
    None
}

const CONST_BITS: i32 = 13;
const PASS1_BITS: i32 = 2;
const FIX_0_298631336: i64 = 2446;
const FIX_0_390180644: i64 = 3196;
const FIX_0_541196100: i64 = 4433;
const FIX_0_765366865: i64 = 6270;
const FIX_0_899976223: i64 = 7373;
const FIX_1_175875602: i64 = 9633;
const FIX_1_501321110: i64 = 12299;
const FIX_1_847759065: i64 = 15137;
const FIX_1_961570560: i64 = 16069;
const FIX_2_053119869: i64 = 16819;
const FIX_2_562915447: i64 = 20995;
const FIX_3_072711026: i64 = 25172;

fn descale(x: i64, n: i32) -> i64 {
    (x + (1 << (n - 1))) >> n
}

/// One 1-D islow pass (even and odd parts): outputs 0..7 before descaling. (libjpeg's
/// shortcuts for all-zero AC columns and rows give the same values, so there are none here.)
fn pass(v: [i64; 8]) -> [i64; 8] {
    let (z2, z3) = (v[2], v[6]);
    let z1 = (z2 + z3) * FIX_0_541196100;
    let tmp2 = z1 + z3 * -FIX_1_847759065;
    let tmp3 = z1 + z2 * FIX_0_765366865;
    let tmp0 = (v[0] + v[4]) << CONST_BITS;
    let tmp1 = (v[0] - v[4]) << CONST_BITS;
    let (tmp10, tmp13, tmp11, tmp12) = (tmp0 + tmp3, tmp0 - tmp3, tmp1 + tmp2, tmp1 - tmp2);
    let (mut t0, mut t1, mut t2, mut t3) = (v[7], v[5], v[3], v[1]);
    let z1 = t0 + t3;
    let z2 = t1 + t2;
    let z3 = t0 + t2;
    let z4 = t1 + t3;
    let z5 = (z3 + z4) * FIX_1_175875602;
    t0 *= FIX_0_298631336;
    t1 *= FIX_2_053119869;
    t2 *= FIX_3_072711026;
    t3 *= FIX_1_501321110;
    let z1 = z1 * -FIX_0_899976223;
    let z2 = z2 * -FIX_2_562915447;
    let z3 = z3 * -FIX_1_961570560 + z5;
    let z4 = z4 * -FIX_0_390180644 + z5;
    t0 += z1 + z3;
    t1 += z2 + z4;
    t2 += z2 + z3;
    t3 += z1 + z4;
    [
        tmp10 + t3,
        tmp11 + t2,
        tmp12 + t1,
        tmp13 + t0,
        tmp13 - t0,
        tmp12 - t1,
        tmp11 - t2,
        tmp10 - t3,
    ]
}

/// `jpeg_idct_islow`: coefficients (natural order) × quantizers → 8×8 samples at `out`.
fn idct_islow(coef: &[i16], q: &[i32; 64], out: &mut [u8], stride: usize) {
    let mut ws = [0i64; 64];
    for col in 0..8 {
        let v: [i64; 8] =
            std::array::from_fn(|r| (coef[r * 8 + col] as i32 * q[r * 8 + col]) as i64);
        let o = pass(v);
        for r in 0..8 {
            ws[r * 8 + col] = descale(o[r], CONST_BITS - PASS1_BITS);
        }
    }
    for row in 0..8 {
        let v: [i64; 8] = std::array::from_fn(|c| ws[row * 8 + c] as i32 as i64);
        let o = pass(v);
        for c in 0..8 {
            let x = descale(o[c], CONST_BITS + PASS1_BITS + 3);
            out[row * stride + c] = (x + 128).clamp(0, 255) as u8;
        }
    }
}

/// Fancy upsampling of a chroma plane (`cw × ch` real samples, `stride` apart) by (hmax, vmax)
/// ∈ {(1,1), (2,1), (2,2)}: a plane of `cw*hmax` columns and `ch*vmax` rows.
fn upsample(p: &[u8], stride: usize, cw: usize, ch: usize, hmax: usize, vmax: usize) -> Vec<u8> {
    let ow = cw * hmax;
    let mut out = vec![0u8; ow * ch * vmax];
    let at = |x: usize, y: usize| p[y * stride + x] as i32;
    match (hmax, vmax) {
        (1, 1) => {
            for y in 0..ch {
                out[y * ow..][..cw].copy_from_slice(&p[y * stride..][..cw]);
            }
        }
        (2, 1) => {
            for y in 0..ch {
                let o = &mut out[y * ow..][..ow];
                let v0 = at(0, y);
                o[0] = v0 as u8;
                o[1] = ((v0 * 3 + at(1, y) + 2) >> 2) as u8;
                for x in 1..cw - 1 {
                    let v = at(x, y) * 3;
                    o[2 * x] = ((v + at(x - 1, y) + 1) >> 2) as u8;
                    o[2 * x + 1] = ((v + at(x + 1, y) + 2) >> 2) as u8;
                }
                let v = at(cw - 1, y);
                o[2 * cw - 2] = ((v * 3 + at(cw - 2, y) + 1) >> 2) as u8;
                o[2 * cw - 1] = v as u8;
            }
        }
        _ => {
            for y in 0..ch {
                for half in 0..2 {
                    let y1 = if half == 0 {
                        y.saturating_sub(1)
                    } else {
                        (y + 1).min(ch - 1)
                    };
                    let col = |x: usize| at(x, y) * 3 + at(x, y1);
                    let o = &mut out[(2 * y + half) * ow..][..ow];
                    let (mut this, next) = (col(0), col(1));
                    o[0] = ((this * 4 + 8) >> 4) as u8;
                    o[1] = ((this * 3 + next + 7) >> 4) as u8;
                    let mut last = std::mem::replace(&mut this, next);
                    for x in 1..cw - 1 {
                        let next = col(x + 1);
                        o[2 * x] = ((this * 3 + last + 8) >> 4) as u8;
                        o[2 * x + 1] = ((this * 3 + next + 7) >> 4) as u8;
                        last = std::mem::replace(&mut this, next);
                    }
                    o[2 * cw - 2] = ((this * 3 + last + 8) >> 4) as u8;
                    o[2 * cw - 1] = ((this * 4 + 7) >> 4) as u8;
                }
            }
        }
    }
    out
}

/// `jdcolor.c`'s YCbCr → RGB tables (16-bit fixed point).
struct Tables {
    cr_r: [i32; 256],
    cb_b: [i32; 256],
    cr_g: [i32; 256],
    cb_g: [i32; 256],
}

impl Tables {
    fn new() -> Self {
        let fix = |x: f64| (x * 65536.0 + 0.5) as i32;
        let half = 1 << 15;
        let mut t = Tables {
            cr_r: [0; 256],
            cb_b: [0; 256],
            cr_g: [0; 256],
            cb_g: [0; 256],
        };
        for i in 0..256 {
            let x = i as i32 - 128;
            t.cr_r[i] = (fix(1.40200) * x + half) >> 16;
            t.cb_b[i] = (fix(1.77200) * x + half) >> 16;
            t.cr_g[i] = -fix(0.71414) * x;
            t.cb_g[i] = -fix(0.34414) * x + half;
        }
        t
    }
}
