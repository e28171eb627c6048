//! The parts of BTF a CO-RE loader needs: the object's own type graph
//! (`.BTF`) to resolve relocation access strings to named struct members, and
//! the CO-RE relocation records of `.BTF.ext`.

use crate::elf::{cstr, u32le};
use crate::Error;

pub const KIND_INT: u32 = 1;
pub const KIND_PTR: u32 = 2;
pub const KIND_ARRAY: u32 = 3;
pub const KIND_STRUCT: u32 = 4;
pub const KIND_UNION: u32 = 5;
pub const KIND_ENUM: u32 = 6;
pub const KIND_TYPEDEF: u32 = 8;
pub const KIND_VOLATILE: u32 = 9;
pub const KIND_CONST: u32 = 10;
pub const KIND_RESTRICT: u32 = 11;
pub const KIND_TYPE_TAG: u32 = 18;
pub const KIND_ENUM64: u32 = 19;

#[derive(Clone, Debug)]
pub struct Member {
    pub name: String,
    pub type_id: u32,
    pub bit_offset: u32,
    /// Bitfield width, 0 for a plain member.
    pub bit_size: u32,
}

#[derive(Clone, Debug, Default)]
pub struct Type {
    pub kind: u32,
    pub name: String,
    /// Size in bytes (INT, STRUCT, UNION, ENUM) or the referenced type id.
    pub size_or_type: u32,
    pub members: Vec<Member>,
    /// ARRAY: element type and count.
    pub elem: u32,
    pub nelems: u32,
}

pub struct Btf {
    /// Indexed by type id; id 0 is `void`.
    pub types: Vec<Type>,
    strings: Vec<u8>,
}

#[derive(Clone, Debug)]
pub struct CoreRelo {
    pub section: String,
    pub insn_off: u32,
    pub type_id: u32,
    pub access: String,
    pub kind: u32,
}

impl Btf {
    pub fn parse(d: &[u8]) -> Result<Btf, Error> {
        if d.len() < 24 || u16::from_le_bytes([d[0], d[1]]) != 0xeb9f {
            return Err(Error::new("bad .BTF section"));
        }
        let hdr = u32le(d, 4)? as usize;
        let (toff, tlen, soff, slen) =
            (u32le(d, 8)? as usize, u32le(d, 12)? as usize, u32le(d, 16)? as usize, u32le(d, 20)? as usize);
        let strings = d.get(hdr + soff..hdr + soff + slen).ok_or_else(|| Error::new("bad .BTF strings"))?.to_vec();
        let mut types = vec![Type::default()];
        let mut p = hdr + toff;
        let end = p + tlen;
        let name = |o: u32| cstr(&strings, o as usize);
        while p < end {
            let info = u32le(d, p + 4)?;
            let vlen = (info & 0xffff) as usize;
            let kind = (info >> 24) & 0x1f;
            let kflag = info >> 31 == 1;
            let mut t = Type { kind, name: name(u32le(d, p)?), size_or_type: u32le(d, p + 8)?, ..Default::default() };
            p += 12;
            match kind {
                KIND_INT | 14 | 17 => p += 4,
                KIND_ARRAY => {
                    t.elem = u32le(d, p)?;
                    t.nelems = u32le(d, p + 8)?;
                    p += 12;
                }
                KIND_STRUCT | KIND_UNION => {
                    for _ in 0..vlen {
                        let off = u32le(d, p + 8)?;
                        let (bit_offset, bit_size) = if kflag { (off & 0xff_ffff, off >> 24) } else { (off, 0) };
                        t.members.push(Member { name: name(u32le(d, p)?), type_id: u32le(d, p + 4)?, bit_offset, bit_size });
                        p += 12;
                    }
                }
                KIND_ENUM => p += 8 * vlen,
                13 => p += 8 * vlen,
                15 | KIND_ENUM64 => p += 12 * vlen,
                _ => {}
            }
            types.push(t);
        }
        Ok(Btf { types, strings })
    }

    pub fn string(&self, off: u32) -> String {
        cstr(&self.strings, off as usize)
    }

    pub fn get(&self, id: u32) -> Option<&Type> {
        self.types.get(id as usize)
    }

    /// Skip typedefs and qualifiers.
    pub fn resolve(&self, mut id: u32) -> u32 {
        for _ in 0..64 {
            match self.get(id) {
                Some(t) if matches!(t.kind, KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG) => {
                    id = t.size_or_type
                }
                _ => break,
            }
        }
        id
    }

    /// Size in bytes of a type.
    pub fn size_of(&self, id: u32) -> u32 {
        let id = self.resolve(id);
        match self.get(id) {
            Some(t) => match t.kind {
                KIND_INT | KIND_STRUCT | KIND_UNION | KIND_ENUM | KIND_ENUM64 | 16 => t.size_or_type,
                KIND_PTR => 8,
                KIND_ARRAY => t.nelems * self.size_of(t.elem),
                _ => 0,
            },
            None => 0,
        }
    }

    pub fn find_struct(&self, name: &str) -> Option<u32> {
        self.types.iter().position(|t| t.kind == KIND_STRUCT && t.name == name).map(|i| i as u32)
    }

    /// The CO-RE relocation records of a `.BTF.ext` section.
    pub fn core_relos(&self, ext: &[u8]) -> Result<Vec<CoreRelo>, Error> {
        if ext.len() < 24 || u16::from_le_bytes([ext[0], ext[1]]) != 0xeb9f {
            return Err(Error::new("bad .BTF.ext section"));
        }
        let hdr = u32le(ext, 4)? as usize;
        if hdr < 32 {
            return Ok(Vec::new());
        }
        let (off, len) = (u32le(ext, 24)? as usize, u32le(ext, 28)? as usize);
        let mut out = Vec::new();
        if len == 0 {
            return Ok(out);
        }
        let mut p = hdr + off;
        let end = p + len;
        let rec = u32le(ext, p)? as usize;
        p += 4;
        while p < end {
            let section = self.string(u32le(ext, p)?);
            let n = u32le(ext, p + 4)? as usize;
            p += 8;
            for _ in 0..n {
                out.push(CoreRelo {
                    section: section.clone(),
                    insn_off: u32le(ext, p)?,
                    type_id: u32le(ext, p + 4)?,
                    access: self.string(u32le(ext, p + 8)?),
                    kind: u32le(ext, p + 12)?,
                });
                p += rec;
            }
        }
        Ok(out)
    }
}
