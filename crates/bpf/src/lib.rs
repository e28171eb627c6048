//! ccbench's BPF congestion-control runtime for the simulator.
//!
//! [`Object::load`] reads a BPF object compiled by clang (`-target bpf`)
//! that defines a `tcp_congestion_ops` struct_ops map: it finds the programs
//! behind each hook, applies the object's CO-RE relocations against the
//! simulator's socket description ([`sock`]), resolves kernel-function calls
//! (kfuncs) and helpers to the simulator's implementations and global data
//! to memory regions, and refuses, with one line naming it, any field, kfunc,
//! helper or feature the simulator does not provide.
//!
//! [`Vm`] is an eBPF interpreter over that object: one per connection, with
//! the socket block, the argument structs, a stack and the object's global
//! data as its memory. Addresses are `region << 32 | offset`, bounds-checked
//! on every access.

pub mod btf;
pub mod elf;
pub mod sock;
mod vm;

pub use vm::Vm;

use std::collections::HashMap;
use std::fmt;

#[derive(Debug, Clone)]
pub struct Error(pub String);

impl Error {
    pub fn new(s: impl Into<String>) -> Error {
        Error(s.into())
    }
}
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Error {}

/// The hooks of `struct tcp_congestion_ops`, in the order of its members.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    Ssthresh,
    CongAvoid,
    SetState,
    CwndEvent,
    InAckEvent,
    PktsAcked,
    MinTsoSegs,
    CongControl,
    UndoCwnd,
    SndbufExpand,
    GetInfo,
    Init,
    Release,
}
pub const N_HOOKS: usize = 13;

/// `tcp_congestion_ops`' members, in `Hook` order.
const MEMBERS: [&str; N_HOOKS] = [
    "ssthresh",
    "cong_avoid",
    "set_state",
    "cwnd_event",
    "in_ack_event",
    "pkts_acked",
    "min_tso_segs",
    "cong_control",
    "undo_cwnd",
    "sndbuf_expand",
    "get_info",
    "init",
    "release",
];

impl Hook {
    /// The `tcp_congestion_ops` member this hook is.
    pub fn member(self) -> &'static str {
        MEMBERS[self as usize]
    }

    pub fn from_member(name: &str) -> Option<Hook> {
        MEMBERS.iter().position(|&m| m == name).map(|i| ALL[i])
    }
}

const ALL: [Hook; N_HOOKS] = [
    Hook::Ssthresh,
    Hook::CongAvoid,
    Hook::SetState,
    Hook::CwndEvent,
    Hook::InAckEvent,
    Hook::PktsAcked,
    Hook::MinTsoSegs,
    Hook::CongControl,
    Hook::UndoCwnd,
    Hook::SndbufExpand,
    Hook::GetInfo,
    Hook::Init,
    Hook::Release,
];

#[cfg(test)]
mod hook_tests {
    use super::*;

    #[test]
    fn members_name_their_hooks() {
        for (i, h) in ALL.iter().enumerate() {
            assert_eq!(*h as usize, i);
            assert_eq!(Hook::from_member(h.member()), Some(*h));
        }
        assert_eq!(Hook::CongAvoid.member(), "cong_avoid");
        assert_eq!(Hook::from_member("nope"), None);
    }
}

/// Memory regions of the VM (the high 32 bits of an address).
pub const R_CTX: u64 = 1;
pub const R_STACK: u64 = 2;
pub const R_SOCK: u64 = 3;
pub const R_ARG: u64 = 4;
/// Global data sections start here, in the order of `Object::data`.
pub const R_DATA: u64 = 5;

pub const STACK_FRAME: usize = 512;
pub const MAX_FRAMES: usize = 8;

/// `TCP_CONG_NEEDS_ECN` in `tcp_congestion_ops.flags`.
pub const TCP_CONG_NEEDS_ECN: u32 = 2;

/// One decoded instruction.
#[derive(Clone, Copy, Debug)]
pub struct Insn {
    pub op: u8,
    pub dst: u8,
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

/// Calls after loading: `src` tells helper (0), local (1) or kfunc (2).
pub const CALL_HELPER: u8 = 0;
pub const CALL_LOCAL: u8 = 1;
pub const CALL_KFUNC: u8 = 2;

pub struct Program {
    pub name: String,
    pub code: Vec<Insn>,
}

/// A loaded struct_ops congestion control.
pub struct Object {
    /// `tcp_congestion_ops.name`.
    pub name: String,
    /// `tcp_congestion_ops.flags`.
    pub flags: u32,
    pub programs: Vec<Program>,
    /// Program index per hook.
    pub hooks: [Option<usize>; N_HOOKS],
    /// Initial contents of the global data sections (region R_DATA + i).
    pub data: Vec<Vec<u8>>,
}

fn kfunc_id(name: &str) -> Option<i32> {
    sock::KFUNCS.iter().position(|&k| k == name).map(|i| i as i32)
}

/// Resolve a CO-RE access string against the local BTF: the named
/// (struct, member) it ends at and the extra byte offset of array indices
/// after it.
fn core_target(btf: &btf::Btf, type_id: u32, access: &str) -> Result<(String, String, u32, u32), Error> {
    let idx: Vec<u32> = access
        .split(':')
        .map(|s| s.parse::<u32>().map_err(|_| Error::new(format!("bad CO-RE access string {access:?}"))))
        .collect::<Result<_, _>>()?;
    let mut t = btf.resolve(type_id);
    let root = btf.get(t).map(|t| t.name.clone()).unwrap_or_default();
    if idx.first().copied().unwrap_or(0) != 0 {
        return Err(Error::new(format!("unsupported: indexing an array of struct {root}")));
    }
    let mut strukt = root.clone();
    let mut last: Option<(String, String)> = None;
    let mut extra = 0u32;
    let mut after_member_size = 0u32;
    for &i in &idx[1..] {
        let ty = btf.get(t).ok_or_else(|| Error::new("bad BTF type in CO-RE relocation"))?;
        match ty.kind {
            btf::KIND_STRUCT | btf::KIND_UNION => {
                let m = ty.members.get(i as usize).ok_or_else(|| Error::new("bad CO-RE member index"))?;
                if !ty.name.is_empty() {
                    strukt = ty.name.clone();
                }
                if !m.name.is_empty() {
                    last = Some((strukt.clone(), m.name.clone()));
                    extra = 0;
                }
                t = btf.resolve(m.type_id);
                after_member_size = btf.size_of(t);
            }
            btf::KIND_ARRAY => {
                let es = btf.size_of(ty.elem);
                extra += i * es;
                t = btf.resolve(ty.elem);
                after_member_size = es;
            }
            _ => return Err(Error::new(format!("unsupported CO-RE access {access:?} into struct {root}"))),
        }
    }
    match last {
        Some((s, m)) => Ok((s, m, extra, after_member_size)),
        None => Ok((root, String::new(), 0, 0)),
    }
}

/// Where the struct_ops map's `name` is in the object file: (file offset,
/// current name). The linux backend rewrites it to give each run's copy of
/// the CCA a unique name.
pub fn struct_ops_name(bytes: &[u8]) -> Result<(usize, String), Error> {
    struct_ops_fields(bytes).map(|(o, n, _)| (o, n))
}

/// As [`struct_ops_name`], and the file offset of `flags` (a u32).
pub fn struct_ops_fields(bytes: &[u8]) -> Result<(usize, String, usize), Error> {
    let elf = elf::Elf::parse(bytes)?;
    ops_section(&elf)?; // before the BTF: a file without a CCA is told so
    let btf_idx = elf.find(".BTF").ok_or_else(|| Error::new("the object has no .BTF section (compile with clang -g)"))?;
    let btf = btf::Btf::parse(elf.bytes(btf_idx))?;
    let (sec, var_off, ty) = ops_var(&elf, &btf)?;
    let members = &btf.get(ty).unwrap().members;
    let at = |name: &str| {
        members
            .iter()
            .find(|m| m.name == name)
            .map(|m| (var_off + m.bit_offset as u64 / 8) as usize)
            .ok_or_else(|| Error::new(format!("tcp_congestion_ops without {name}")))
    };
    let (off, flags) = (at("name")?, at("flags")?);
    let s = &elf.sections[sec];
    if s.kind != elf::SHT_PROGBITS || off + 16 > s.size || flags + 4 > s.size {
        return Err(Error::new("the struct_ops data is outside its section"));
    }
    let name = elf::cstr(&bytes[..s.offset + off + 16], s.offset + off);
    // The members that point at a program: a relocation at their offset.
    let size = btf.size_of(ty) as u64;
    let mut set = Vec::new();
    for r in elf.rels_for(sec)? {
        if r.offset >= var_off && r.offset < var_off + size {
            if let Some(m) = members.iter().find(|m| m.bit_offset as u64 / 8 == r.offset - var_off) {
                set.push(m.name.as_str());
            }
        }
    }
    check_required(&name, |m| set.contains(&m))?;
    Ok((s.offset + off, name, s.offset + flags))
}

/// The kernel registers no tcp_congestion_ops without ssthresh, undo_cwnd
/// and one of cong_avoid or cong_control (tcp_cong.c; it fails with EINVAL
/// and no reason given): both backends refuse such an object up front.
fn check_required(name: &str, has: impl Fn(&str) -> bool) -> Result<(), Error> {
    let mut missing: Vec<&str> = ["ssthresh", "undo_cwnd"].into_iter().filter(|m| !has(m)).collect();
    if !has("cong_avoid") && !has("cong_control") {
        missing.push("cong_avoid or cong_control");
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::new(format!(
        "{name}: tcp_congestion_ops sets no {}; the kernel registers none without ssthresh, undo_cwnd, and \
         cong_avoid or cong_control",
        missing.join(", ")
    )))
}

/// The `.struct_ops` section. `.struct_ops.link` is refused on both
/// backends: the linux backend registers the map with bpftool, and the
/// libbpf of Debian 12's bpftool skips that section (a simulator that took
/// it would run what the kernel side cannot).
fn ops_section(elf: &elf::Elf) -> Result<usize, Error> {
    if let Some(i) = elf.find(".struct_ops") {
        return Ok(i);
    }
    if elf.find(".struct_ops.link").is_some() {
        return Err(Error::new(
            "SEC(\".struct_ops.link\") is not supported (the linux backend registers the map with bpftool, \
             whose libbpf here does not know that section): use SEC(\".struct_ops\")",
        ));
    }
    Err(Error::new("the object defines no struct_ops map (SEC(\".struct_ops\") struct tcp_congestion_ops ...)"))
}

/// The struct_ops section, the offset of the tcp_congestion_ops variable in
/// it and the BTF id of tcp_congestion_ops.
fn ops_var(elf: &elf::Elf, btf: &btf::Btf) -> Result<(usize, u64, u32), Error> {
    let ops_sec = ops_section(elf)?;
    let ops_ty = btf
        .find_struct("tcp_congestion_ops")
        .ok_or_else(|| Error::new("the struct_ops map is not a struct tcp_congestion_ops"))?;
    let vars: Vec<&elf::Symbol> =
        elf.symbols.iter().filter(|s| s.shndx as usize == ops_sec && s.kind == 1 /* STT_OBJECT */).collect();
    if vars.len() != 1 {
        return Err(Error::new(format!("expected one tcp_congestion_ops in {}, found {}", elf.sections[ops_sec].name, vars.len())));
    }
    Ok((ops_sec, vars[0].value, ops_ty))
}

impl Object {
    /// Load a BPF object file.
    pub fn load(path: &str) -> Result<Object, Error> {
        let bytes = std::fs::read(path).map_err(|e| Error::new(format!("cannot read BPF object {path}: {e}")))?;
        Object::parse(&bytes)
    }

    pub fn parse(bytes: &[u8]) -> Result<Object, Error> {
        let elf = elf::Elf::parse(bytes)?;
        ops_section(&elf)?; // before the BTF: a file without a CCA is told so
        let btf_idx = elf.find(".BTF").ok_or_else(|| Error::new("the object has no .BTF section (compile with clang -g)"))?;
        let btf = btf::Btf::parse(elf.bytes(btf_idx))?;
        let relos = match elf.find(".BTF.ext") {
            Some(i) => btf.core_relos(elf.bytes(i))?,
            None => Vec::new(),
        };

        // Global data sections become VM regions.
        let mut data_region: HashMap<usize, u64> = HashMap::new();
        let mut data = Vec::new();
        for (i, s) in elf.sections.iter().enumerate() {
            let is_data = (s.kind == elf::SHT_PROGBITS || s.kind == elf::SHT_NOBITS)
                && s.flags & 2 != 0 // SHF_ALLOC
                && s.flags & elf::SHF_EXECINSTR == 0
                && (s.name.starts_with(".data") || s.name.starts_with(".rodata") || s.name.starts_with(".bss"));
            if is_data {
                data_region.insert(i, R_DATA + data.len() as u64);
                data.push(if s.kind == elf::SHT_NOBITS { vec![0; s.size] } else { elf.bytes(i).to_vec() });
            }
        }
        if elf.find(".maps").is_some() || elf.find("maps").is_some() {
            return Err(Error::new("unsupported: BPF maps (the simulator gives a CCA its socket's icsk_ca_priv and global variables only)"));
        }

        // Decode and relocate every executable section.
        let mut code: HashMap<usize, Vec<Insn>> = HashMap::new();
        // Calls from a section into .text: (section, insn index, target in .text).
        let mut text_calls: Vec<(usize, usize, usize)> = Vec::new();
        let text_idx = elf.find(".text");
        for (si, s) in elf.sections.iter().enumerate() {
            if s.kind != elf::SHT_PROGBITS || s.flags & elf::SHF_EXECINSTR == 0 || s.size == 0 {
                continue;
            }
            let raw = elf.bytes(si);
            let mut insns: Vec<Insn> = raw
                .chunks_exact(8)
                .map(|b| Insn {
                    op: b[0],
                    dst: b[1] & 0xf,
                    src: b[1] >> 4,
                    off: i16::from_le_bytes([b[2], b[3]]),
                    imm: i32::from_le_bytes([b[4], b[5], b[6], b[7]]),
                })
                .collect();
            for r in elf.rels_for(si)? {
                let n = (r.offset / 8) as usize;
                let sym = elf.symbols.get(r.sym).ok_or_else(|| Error::new("bad relocation symbol"))?.clone();
                let insn = insns.get(n).copied().ok_or_else(|| Error::new("relocation outside the code"))?;
                if insn.op == 0x85 {
                    if sym.shndx == 0 {
                        let id = kfunc_id(&sym.name).ok_or_else(|| {
                            Error::new(format!("unsupported kernel function {} (the simulator provides {})", sym.name, sock::KFUNCS.join(", ")))
                        })?;
                        insns[n].src = CALL_KFUNC;
                        insns[n].imm = id;
                    } else if Some(sym.shndx as usize) == text_idx {
                        let target = (sym.value / 8) as i64 + insn.imm as i64 + 1;
                        if Some(si) == text_idx {
                            insns[n].imm = (target - n as i64 - 1) as i32;
                        } else {
                            text_calls.push((si, n, target as usize));
                        }
                    } else if sym.shndx as usize != si {
                        return Err(Error::new(format!("unsupported call to {} in another section", sym.name)));
                    }
                } else if insn.op == 0x18 {
                    if sym.shndx == 0 {
                        return Err(Error::new(format!("unsupported extern {} (the simulator has no kconfig or ksym variables)", sym.name)));
                    }
                    let region = data_region.get(&(sym.shndx as usize)).copied().ok_or_else(|| {
                        let sec = &elf.sections[sym.shndx as usize].name;
                        Error::new(format!("unsupported reference to {} in section {sec}", sym.name))
                    })?;
                    let addr = (region << 32) | (sym.value as u64).wrapping_add(insn.imm as u32 as u64) & 0xffff_ffff;
                    insns[n].imm = addr as u32 as i32;
                    insns[n].src = 0;
                    if let Some(next) = insns.get_mut(n + 1) {
                        next.imm = (addr >> 32) as i32;
                    }
                } else {
                    return Err(Error::new(format!("unsupported relocation against {} at instruction {n} of {}", sym.name, s.name)));
                }
            }
            // CO-RE relocations.
            for r in relos.iter().filter(|r| r.section == s.name) {
                let n = (r.insn_off / 8) as usize;
                apply_core(&btf, r, &mut insns, n, &s.name)?;
            }
            for (i, insn) in insns.iter().enumerate() {
                let class = insn.op & 7;
                let v4 = ((class == 4 || class == 7) && matches!(insn.op & 0xf0, 0x30 | 0x90 | 0xb0) && insn.off != 0)
                    || (class == 1 && insn.op & 0xe0 == 0x80);
                if v4 {
                    return Err(Error::new(format!(
                        "unsupported: BPF ISA v4 instruction 0x{:02x} in {} (instruction {i}; compile without -mcpu=v4)",
                        insn.op, s.name
                    )));
                }
                if insn.op == 0x85 && insn.src == CALL_HELPER && !sock::HELPERS.iter().any(|h| h.0 == insn.imm) {
                    return Err(Error::new(format!("unsupported BPF helper #{} called in {} (instruction {i})", insn.imm, s.name)));
                }
            }
            code.insert(si, insns);
        }

        // Each program section gets .text appended for its subprogram calls.
        let text = text_idx.and_then(|t| code.get(&t).cloned()).unwrap_or_default();
        let mut programs = Vec::new();
        let mut prog_of_section: HashMap<usize, usize> = HashMap::new();
        for (si, s) in elf.sections.iter().enumerate() {
            if Some(si) == text_idx || !code.contains_key(&si) {
                continue;
            }
            let mut c = code[&si].clone();
            let base = c.len();
            for &(csi, n, target) in &text_calls {
                if csi == si {
                    c[n].imm = (base as i64 + target as i64 - n as i64 - 1) as i32;
                }
            }
            c.extend_from_slice(&text);
            prog_of_section.insert(si, programs.len());
            programs.push(Program { name: s.name.clone(), code: c });
        }

        // The struct_ops map: which program serves which hook, the name, flags.
        let (ops_sec, var_off, ops_ty) = ops_var(&elf, &btf)?;
        let ops_size = btf.size_of(ops_ty) as u64;
        let ops_data = elf.bytes(ops_sec);
        let members = &btf.get(ops_ty).unwrap().members;
        let member_at = |off: u64| members.iter().find(|m| m.bit_offset as u64 / 8 == off);
        let mut name = String::new();
        let mut flags = 0;
        for m in members {
            let o = (var_off + m.bit_offset as u64 / 8) as usize;
            if m.name == "name" {
                name = elf::cstr(&ops_data[..(o + 16).min(ops_data.len())], o);
            } else if m.name == "flags" {
                flags = elf::u32le(ops_data, o)?;
            }
        }
        let mut hooks = [None; N_HOOKS];
        for r in elf.rels_for(ops_sec)? {
            if r.offset < var_off || r.offset >= var_off + ops_size {
                continue;
            }
            let m = member_at(r.offset - var_off).ok_or_else(|| Error::new("struct_ops relocation at no member"))?;
            let hook = Hook::from_member(&m.name)
                .ok_or_else(|| Error::new(format!("unsupported tcp_congestion_ops member {}", m.name)))?;
            let sym = &elf.symbols[r.sym];
            let p = prog_of_section
                .get(&(sym.shndx as usize))
                .copied()
                .ok_or_else(|| Error::new(format!("{} does not point at a struct_ops program", m.name)))?;
            hooks[hook as usize] = Some(p);
        }
        if name.is_empty() {
            return Err(Error::new("the tcp_congestion_ops has no name"));
        }
        check_required(&name, |m| Hook::from_member(m).is_some_and(|h| hooks[h as usize].is_some()))?;
        Ok(Object { name, flags, programs, hooks, data })
    }

    pub fn has(&self, h: Hook) -> bool {
        self.hooks[h as usize].is_some()
    }
}

fn apply_core(btf: &btf::Btf, r: &btf::CoreRelo, insns: &mut [Insn], n: usize, sec: &str) -> Result<(), Error> {
    let insn = *insns.get(n).ok_or_else(|| Error::new("CO-RE relocation outside the code"))?;
    let root = btf.get(btf.resolve(r.type_id)).map(|t| t.name.clone()).unwrap_or_default();
    let value: u64 = match r.kind {
        0..=5 => {
            let (strukt, member, extra, elem_size) = core_target(btf, r.type_id, &r.access)?;
            let field = if member.is_empty() { None } else { sock::lookup(&strukt, &member) };
            if r.kind == 2 {
                field.is_some() as u64
            } else {
                let f = field.ok_or_else(|| {
                    if member.is_empty() {
                        Error::new(format!("unsupported field access into struct {root}"))
                    } else {
                        Error::new(format!("unsupported field {strukt}.{member} (the simulator does not model it)"))
                    }
                })?;
                let class = insn.op & 7;
                if (class == 2 || class == 3) && !f.writable && r.kind == 0 {
                    return Err(Error::new(format!("{strukt}.{member} is read-only for a congestion control (written in {sec})")));
                }
                match r.kind {
                    0 => (f.off + extra) as u64,
                    // an array element's size when the access indexes into the member
                    1 => (if extra > 0 { elem_size } else { f.size }) as u64,
                    3 => f.signed as u64,
                    // LSHIFT_U64 and RSHIFT_U64: the field sits at bit 0 of its
                    // bytes, so both are 64 minus its width in bits
                    _ => {
                        if f.bits > 0 {
                            64 - f.bits as u64
                        } else {
                            64 - 8 * (if extra > 0 { elem_size } else { f.size }) as u64
                        }
                    }
                }
            }
        }
        8 | 9 | 12 => {
            let size = sock::struct_size(&root);
            match r.kind {
                8 | 12 => size.is_some() as u64,
                _ => size.ok_or_else(|| Error::new(format!("unsupported type struct {root}")))? as u64,
            }
        }
        6 => r.type_id as u64,
        k => return Err(Error::new(format!("unsupported CO-RE relocation kind {k} (on struct {root})"))),
    };
    let class = insn.op & 7;
    match class {
        1..=3 => insns[n].off = value as i16,
        4 | 7 => insns[n].imm = value as i32,
        0 if insn.op == 0x18 => {
            insns[n].imm = value as u32 as i32;
            if let Some(nx) = insns.get_mut(n + 1) {
                nx.imm = (value >> 32) as i32;
            }
        }
        _ => return Err(Error::new(format!("CO-RE relocation on an unexpected instruction in {sec}"))),
    }
    Ok(())
}
