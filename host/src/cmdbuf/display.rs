//! A command buffer for a person: what `umd inspect` and `umd translate` print.

use std::fmt;

use super::{CommandBuffer, Role};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl fmt::Display for CommandBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "UMDCMD v{} target {}",
            super::FORMAT_VERSION,
            self.target
        )?;
        writeln!(f, "bindings ({}):", self.bindings.len())?;
        for (i, b) in self.bindings.iter().enumerate() {
            let role = match b.role {
                Role::Input => "input",
                Role::Output => "output",
                Role::Workspace => "workspace",
            };
            let bytes = b.desc.byte_size().unwrap_or(0);
            writeln!(
                f,
                "  #{i} {role:<9} {:<8} {} ({bytes} bytes)",
                b.desc.name, b.desc
            )?;
        }
        writeln!(f, "launches ({}):", self.launches.len())?;
        for (i, l) in self.launches.iter().enumerate() {
            writeln!(
                f,
                "  [{i}] {}::{} from {} (module {}…)",
                l.module.id,
                l.entry_point,
                l.module.plugin,
                &hex(&l.module.hash)[..16]
            )?;
            writeln!(
                f,
                "      grid {} block {} shared {} B, params {} B",
                l.grid,
                l.block,
                l.shared_memory,
                l.params.len()
            )?;
            for r in &l.relocations {
                writeln!(
                    f,
                    "      @{:<4} -> binding #{} ({:?})",
                    r.offset, r.binding, r.access
                )?;
            }
            for (row, chunk) in l.params.chunks(32).enumerate() {
                writeln!(f, "      {:04x}: {}", row * 32, hex(chunk))?;
            }
        }
        Ok(())
    }
}
