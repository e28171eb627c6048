//! A minimal reader of 64-bit little-endian relocatable ELF files, as clang
//! writes them for the BPF target: sections, the symbol table and REL
//! relocations. Nothing else of ELF is needed to load a BPF object.

use crate::Error;

pub struct Section {
    pub name: String,
    pub kind: u32,
    pub flags: u64,
    pub offset: usize,
    pub size: usize,
    pub link: u32,
    pub info: u32,
}

#[derive(Clone, Debug)]
pub struct Symbol {
    pub name: String,
    pub value: u64,
    pub size: u64,
    /// Section index (0 = undefined, e.g. a `__ksym` extern).
    pub shndx: u16,
    /// STT_* type (low nibble of st_info).
    pub kind: u8,
}

pub struct Rel {
    pub offset: u64,
    pub sym: usize,
    pub kind: u32,
}

pub struct Elf<'a> {
    pub data: &'a [u8],
    pub sections: Vec<Section>,
    pub symbols: Vec<Symbol>,
}

pub const SHT_PROGBITS: u32 = 1;
pub const SHT_SYMTAB: u32 = 2;
pub const SHT_NOBITS: u32 = 8;
pub const SHT_REL: u32 = 9;
pub const STT_SECTION: u8 = 3;
pub const SHF_EXECINSTR: u64 = 4;

fn u16le(d: &[u8], o: usize) -> Result<u16, Error> {
    d.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]])).ok_or_else(|| Error::new("truncated ELF file"))
}
pub(crate) fn u32le(d: &[u8], o: usize) -> Result<u32, Error> {
    d.get(o..o + 4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .ok_or_else(|| Error::new("truncated ELF file"))
}
fn u64le(d: &[u8], o: usize) -> Result<u64, Error> {
    d.get(o..o + 8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
        .ok_or_else(|| Error::new("truncated ELF file"))
}

pub(crate) fn cstr(d: &[u8], o: usize) -> String {
    let s = d.get(o..).unwrap_or(&[]);
    let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
    String::from_utf8_lossy(&s[..end]).into_owned()
}

impl<'a> Elf<'a> {
    pub fn parse(data: &'a [u8]) -> Result<Elf<'a>, Error> {
        if data.len() < 64 || &data[..4] != b"\x7fELF" {
            return Err(Error::new("not an ELF file (expected a BPF object compiled with clang -target bpf)"));
        }
        if data[4] != 2 || data[5] != 1 {
            return Err(Error::new("not a 64-bit little-endian ELF file (compile with clang -target bpf)"));
        }
        let machine = u16le(data, 18)?;
        if machine != 247 {
            return Err(Error::new(format!("ELF machine {machine} is not BPF (247): compile with clang -target bpf")));
        }
        let shoff = u64le(data, 40)? as usize;
        let shentsize = u16le(data, 58)? as usize;
        let shnum = u16le(data, 60)? as usize;
        let shstrndx = u16le(data, 62)? as usize;
        let mut raw = Vec::with_capacity(shnum);
        for i in 0..shnum {
            let b = shoff + i * shentsize;
            raw.push((
                u32le(data, b)?,
                Section {
                    name: String::new(),
                    kind: u32le(data, b + 4)?,
                    flags: u64le(data, b + 8)?,
                    offset: u64le(data, b + 24)? as usize,
                    size: u64le(data, b + 32)? as usize,
                    link: u32le(data, b + 40)?,
                    info: u32le(data, b + 44)?,
                },
            ));
        }
        let stroff = raw.get(shstrndx).map(|s| s.1.offset).ok_or_else(|| Error::new("ELF file without section names"))?;
        let mut sections = Vec::with_capacity(shnum);
        for (name_off, mut s) in raw {
            s.name = cstr(data, stroff + name_off as usize);
            if s.kind != SHT_NOBITS && s.offset + s.size > data.len() {
                return Err(Error::new(format!("ELF section {} runs past the end of the file", s.name)));
            }
            sections.push(s);
        }
        let mut elf = Elf { data, sections, symbols: Vec::new() };
        if let Some(st) = elf.sections.iter().find(|s| s.kind == SHT_SYMTAB) {
            let strtab = elf.sections.get(st.link as usize).map(|s| s.offset).unwrap_or(0);
            let n = st.size / 24;
            let mut syms = Vec::with_capacity(n);
            for i in 0..n {
                let b = st.offset + i * 24;
                syms.push(Symbol {
                    name: cstr(data, strtab + u32le(data, b)? as usize),
                    kind: data[b + 4] & 0xf,
                    shndx: u16le(data, b + 6)?,
                    value: u64le(data, b + 8)?,
                    size: u64le(data, b + 16)?,
                });
            }
            elf.symbols = syms;
        }
        Ok(elf)
    }

    pub fn bytes(&self, idx: usize) -> &'a [u8] {
        let s = &self.sections[idx];
        if s.kind == SHT_NOBITS {
            return &[];
        }
        &self.data[s.offset..s.offset + s.size]
    }

    pub fn find(&self, name: &str) -> Option<usize> {
        self.sections.iter().position(|s| s.name == name)
    }

    /// The REL relocations that apply to section `target`.
    pub fn rels_for(&self, target: usize) -> Result<Vec<Rel>, Error> {
        let mut out = Vec::new();
        for s in &self.sections {
            if s.kind != SHT_REL || s.info as usize != target {
                continue;
            }
            for i in 0..s.size / 16 {
                let b = s.offset + i * 16;
                let info = u64le(self.data, b + 8)?;
                out.push(Rel { offset: u64le(self.data, b)?, sym: (info >> 32) as usize, kind: info as u32 });
            }
        }
        Ok(out)
    }
}
