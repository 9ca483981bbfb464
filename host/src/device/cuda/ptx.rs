//! The kernels of a PTX module and their parameter lists (`.entry NAME( .param … )`), and the
//! check of a planned launch against them: the parameter block is exactly the size the driver
//! expects (last parameter's offset + size, each parameter at its alignment, no trailing
//! padding), and every relocation's 8-byte device address lands on a 64-bit scalar parameter.
//!
//! Pure text processing: no driver, no compiler. Owns nothing else.

use std::fmt;

/// One kernel parameter, as its `.param` declaration lays it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub offset: u32,
    pub size: u32,
    pub align: u32,
    /// A 64-bit scalar (`.u64`, `.s64`, `.b64`): where a device address may go.
    pub word64: bool,
}

/// One kernel (`.entry`) of a module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub params: Vec<Param>,
}

impl Entry {
    /// The parameter block size the driver expects: last offset + size.
    pub fn param_bytes(&self) -> u32 {
        self.params.last().map_or(0, |p| p.offset + p.size)
    }

    /// Whether a launch's block of `params` bytes, with device addresses at `relocations`,
    /// matches this kernel.
    pub fn check(&self, params: usize, relocations: &[u32]) -> Result<(), String> {
        let want = self.param_bytes() as usize;
        if params != want {
            return Err(format!(
                "kernel `{}` takes {want} parameter bytes ({}), the plan packs {params}",
                self.name, self
            ));
        }
        for &at in relocations {
            if !self.params.iter().any(|p| p.offset == at && p.word64) {
                return Err(format!(
                    "kernel `{}`: the relocation at byte {at} is not on a 64-bit parameter ({})",
                    self.name, self
                ));
            }
        }
        Ok(())
    }
}

impl fmt::Display for Entry {
    /// `@0:8p @8:8p @16:4`: offset, size, `p` where a pointer fits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .params
            .iter()
            .map(|p| {
                format!(
                    "@{}:{}{}",
                    p.offset,
                    p.size,
                    if p.word64 { "p" } else { "" }
                )
            })
            .collect();
        if parts.is_empty() {
            f.write_str("no parameters")
        } else {
            f.write_str(&parts.join(" "))
        }
    }
}

/// Every `.entry` of `ptx`, or what could not be read.
pub fn entries(ptx: &str) -> Result<Vec<Entry>, String> {
    let mut out = Vec::new();
    let mut rest = ptx;
    while let Some(at) = find_directive(rest, ".entry") {
        rest = &rest[at + ".entry".len()..];
        let open = rest
            .find('(')
            .ok_or("an `.entry` without a parameter list")?;
        let name = rest[..open].trim().to_string();
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(format!("an `.entry` with an unreadable name `{name}`"));
        }
        let close = rest[open..]
            .find(')')
            .ok_or_else(|| format!("`.entry {name}`: unterminated parameter list"))?;
        let list = &rest[open + 1..open + close];
        rest = &rest[open + close..];
        let mut params = Vec::new();
        let mut end = 0u32;
        for decl in list.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            let (size, align, word64) =
                param(decl).map_err(|e| format!("`.entry {name}`: `{decl}`: {e}"))?;
            let offset = end.next_multiple_of(align);
            end = offset + size;
            params.push(Param {
                offset,
                size,
                align,
                word64,
            });
        }
        out.push(Entry { name, params });
    }
    Ok(out)
}

/// Where `directive` starts as a whole word in `text`.
fn find_directive(text: &str, directive: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(directive) {
        let at = from + i;
        let after = text[at + directive.len()..].chars().next();
        if after.is_some_and(char::is_whitespace) {
            return Some(at);
        }
        from = at + directive.len();
    }
    None
}

/// `(size, align, 64-bit scalar)` of one `.param` declaration.
fn param(decl: &str) -> Result<(u32, u32, bool), String> {
    let mut words = decl.split_whitespace();
    if words.next() != Some(".param") {
        return Err("not a `.param`".into());
    }
    let (mut align, mut ty, mut name, mut pointer) = (None, None, None, false);
    while let Some(w) = words.next() {
        match w {
            // `.ptr [.space] .align N` describes the pointee, not the parameter.
            ".ptr" => pointer = true,
            ".global" | ".const" | ".shared" | ".local" => {}
            ".align" => {
                let n: u32 = words
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n: &u32| n.is_power_of_two())
                    .ok_or("`.align` without a power of two")?;
                if !pointer {
                    align = Some(n);
                }
            }
            w if w.starts_with('.') => ty = Some(w),
            w => name = Some(w),
        }
    }
    let ty = ty.ok_or("no type")?;
    let unknown = || format!("unknown type `{ty}`");
    let (class, bits) = (
        ty.get(..2).ok_or_else(unknown)?,
        ty.get(2..).ok_or_else(unknown)?,
    );
    let scalar: u32 = match bits {
        "8" => 1,
        "16" => 2,
        "32" => 4,
        "64" => 8,
        _ => return Err(unknown()),
    };
    if !matches!(class, ".u" | ".s" | ".b" | ".f") {
        return Err(unknown());
    }
    let name = name.ok_or("no name")?;
    let count = match name.split_once('[') {
        Some((_, n)) => n
            .trim_end_matches(']')
            .parse::<u32>()
            .map_err(|_| format!("unreadable array length in `{name}`"))?,
        None => 1,
    };
    let size = scalar.checked_mul(count).ok_or("parameter too large")?;
    let word64 = count == 1 && scalar == 8 && ty != ".f64";
    Ok((size, align.unwrap_or(scalar), word64))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVRTC 13.0's output for
    /// `k1(const float*, float*, unsigned long long, int, struct{float; double; int})` and
    /// `k2(char, short, int4)`, plus a `.ptr` form and a kernel without parameters.
    const PTX: &str = "
.version 9.0
.target sm_90
.address_size 64

	// .globl	k1

.visible .entry k1(
	.param .u64 k1_param_0,
	.param .u64 k1_param_1,
	.param .u64 k1_param_2,
	.param .u32 k1_param_3,
	.param .align 8 .b8 k1_param_4[24]
)
{
	ret;
}
.visible .entry k2(
	.param .u8 k2_param_0,
	.param .u16 k2_param_1,
	.param .align 16 .b8 k2_param_2[16]
)
{ ret; }
.entry k3(
	.param .u64 .ptr .global .align 1 k3_param_0,
	.param .f64 k3_param_1,
	.param .f32 k3_param_2
)
{ ret; }
.visible .entry k4()
{ ret; }
";

    fn get(name: &str) -> Entry {
        entries(PTX)
            .unwrap()
            .into_iter()
            .find(|e| e.name == name)
            .unwrap()
    }

    #[test]
    fn layouts_follow_each_alignment() {
        assert_eq!(entries(PTX).unwrap().len(), 4);
        let k1 = get("k1");
        assert_eq!(k1.to_string(), "@0:8p @8:8p @16:8p @24:4 @32:24");
        assert_eq!(k1.param_bytes(), 56);
        let k2 = get("k2");
        assert_eq!(k2.to_string(), "@0:1 @2:2 @16:16");
        assert_eq!(k2.param_bytes(), 32);
        // `.ptr .align 1` is the pointee's alignment; a double is no pointer slot.
        assert_eq!(get("k3").to_string(), "@0:8p @8:8 @16:4");
        assert_eq!(get("k3").param_bytes(), 20);
        assert_eq!(get("k4").param_bytes(), 0);
    }

    #[test]
    fn launches_are_checked_for_size_and_pointer_slots() {
        let k1 = get("k1");
        assert_eq!(k1.check(56, &[0, 8, 16]), Ok(()));
        // Trailing padding is a mismatch: the driver wants exactly last offset + size.
        let e = k1.check(64, &[0]).unwrap_err();
        assert!(
            e.contains("takes 56 parameter bytes") && e.contains("packs 64"),
            "{e}"
        );
        let e = k1.check(56, &[24]).unwrap_err();
        assert!(
            e.contains("relocation at byte 24 is not on a 64-bit parameter"),
            "{e}"
        );
        assert!(
            k1.check(56, &[32]).is_err(),
            "inside a struct is no pointer slot"
        );
        assert_eq!(get("k4").check(0, &[]), Ok(()));
    }

    #[test]
    fn damaged_text_is_an_error_not_a_panic() {
        for bad in [
            ".entry k(\n.param .u64 a",
            ".entry (\n)",
            ".entry k(\n.param .u48 a\n)",
            ".entry k(\n.param . a\n)",
            ".entry k(\n.param .é a\n)",
            ".entry k(\n.param .align 3 .b8 a[4]\n)",
            ".entry k(\n.param .b8 a[x]\n)",
            ".entry k(\n.reg .u32 a\n)",
            ".entry k",
        ] {
            assert!(entries(bad).is_err(), "{bad}");
        }
        // `.entry` only as a whole directive.
        assert_eq!(entries("// .entryway\n").unwrap(), vec![]);
    }
}
