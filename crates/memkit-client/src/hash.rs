//! The key hash functions of libhashkit (libmemcached), computed exactly as it computes them.
//!
//! libhashkit reads keys as `const char *`, and `char` is signed on the platforms people run
//! it on (x86-64, and the usual ARM Linux ABIs treat it as unsigned — we follow x86-64), so
//! several functions sign-extend bytes `>= 0x80` before mixing them in. Its "64-bit" FNV
//! functions return 32 bits: `fnv1_64` truncates the 64-bit state, `fnv1a_64` runs on the
//! truncated 32-bit constants. All of this is observable in which server a key lands on, so
//! it is reproduced here and pinned by libhashkit's published vectors (`tests/hashes.hpp`).

use md5::{Digest, Md5};

mod lanes;
pub use lanes::md5_hashes;

/// A hash function from libhashkit's menu.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HashFn {
    /// Bob Jenkins' one-at-a-time (libhashkit's `default`).
    OneAtATime,
    /// The first four bytes of the MD5 digest, little-endian (ketama's key hash).
    #[default]
    Md5,
    /// memcached's classic 15-bit CRC: `(crc32(key) >> 16) & 0x7fff`.
    Crc,
    /// FNV-1 over a 64-bit state, truncated to 32 bits.
    Fnv1_64,
    /// libhashkit's "FNV-1a 64", which runs on the 32-bit truncations of the 64-bit constants.
    Fnv1a_64,
    /// FNV-1, 32 bits.
    Fnv1_32,
    /// FNV-1a, 32 bits.
    Fnv1a_32,
}

impl HashFn {
    /// Hashes `key`.
    pub fn hash(self, key: &[u8]) -> u32 {
        match self {
            HashFn::OneAtATime => one_at_a_time(key),
            HashFn::Md5 => md5_hash(key),
            HashFn::Crc => crc15(key),
            HashFn::Fnv1_64 => fnv1_64(key),
            HashFn::Fnv1a_64 => fnv1a_64(key),
            HashFn::Fnv1_32 => fnv1_32(key),
            HashFn::Fnv1a_32 => fnv1a_32(key),
        }
    }

    /// The name libmemcached and this crate's configuration use.
    pub fn name(self) -> &'static str {
        match self {
            HashFn::OneAtATime => "one_at_a_time",
            HashFn::Md5 => "md5",
            HashFn::Crc => "crc",
            HashFn::Fnv1_64 => "fnv1_64",
            HashFn::Fnv1a_64 => "fnv1a_64",
            HashFn::Fnv1_32 => "fnv1_32",
            HashFn::Fnv1a_32 => "fnv1a_32",
        }
    }
}

impl std::str::FromStr for HashFn {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let all = [
            HashFn::OneAtATime,
            HashFn::Md5,
            HashFn::Crc,
            HashFn::Fnv1_64,
            HashFn::Fnv1a_64,
            HashFn::Fnv1_32,
            HashFn::Fnv1a_32,
        ];
        all.into_iter()
            .find(|h| h.name() == s || (s == "default" && *h == HashFn::OneAtATime))
            .ok_or_else(|| format!("unknown hash function {s:?}"))
    }
}

/// A byte as libhashkit's `(uint32_t) key[x]` sees it: sign-extended.
fn signed(b: u8) -> u32 {
    b as i8 as i32 as u32
}

/// The 16-byte MD5 digest.
pub fn md5_digest(data: &[u8]) -> [u8; 16] {
    Md5::digest(data).into()
}

/// libhashkit's `hashkit_md5`.
pub fn md5_hash(key: &[u8]) -> u32 {
    let d = md5_digest(key);
    u32::from_le_bytes([d[0], d[1], d[2], d[3]])
}

/// memcached's classic 15-bit CRC (libhashkit's `hashkit_crc32`, python-memcached's
/// `cmemcache_hash`).
pub fn crc15(key: &[u8]) -> u32 {
    (crc32fast::hash(key) >> 16) & 0x7fff
}

/// libhashkit's `hashkit_one_at_a_time`.
pub fn one_at_a_time(key: &[u8]) -> u32 {
    let mut v: u32 = 0;
    for &b in key {
        v = v.wrapping_add(signed(b));
        v = v.wrapping_add(v << 10);
        v ^= v >> 6;
    }
    v = v.wrapping_add(v << 3);
    v ^= v >> 11;
    v.wrapping_add(v << 15)
}

const FNV_32_INIT: u32 = 2_166_136_261;
const FNV_32_PRIME: u32 = 16_777_619;
const FNV_64_INIT: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_64_PRIME: u64 = 0x0100_0000_01b3;

/// libhashkit's `hashkit_fnv1_32`.
pub fn fnv1_32(key: &[u8]) -> u32 {
    key.iter().fold(FNV_32_INIT, |h, &b| {
        h.wrapping_mul(FNV_32_PRIME) ^ signed(b)
    })
}

/// libhashkit's `hashkit_fnv1a_32`.
pub fn fnv1a_32(key: &[u8]) -> u32 {
    key.iter().fold(FNV_32_INIT, |h, &b| {
        (h ^ signed(b)).wrapping_mul(FNV_32_PRIME)
    })
}

/// libhashkit's `hashkit_fnv1_64`: a 64-bit FNV-1 returned as its low 32 bits.
pub fn fnv1_64(key: &[u8]) -> u32 {
    key.iter().fold(FNV_64_INIT, |h, &b| {
        h.wrapping_mul(FNV_64_PRIME) ^ (b as i8 as i64 as u64)
    }) as u32
}

/// libhashkit's `hashkit_fnv1a_64`: FNV-1a on the 32-bit truncations of the 64-bit constants.
pub fn fnv1a_64(key: &[u8]) -> u32 {
    key.iter().fold(FNV_64_INIT as u32, |h, &b| {
        (h ^ signed(b)).wrapping_mul(FNV_64_PRIME as u32)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // libmemcached's test/fixtures/hashes.hpp.
    const INPUT: [&str; 26] = [
        "apple",
        "beat",
        "carrot",
        "daikon",
        "eggplant",
        "flower",
        "green",
        "hide",
        "ick",
        "jack",
        "kick",
        "lime",
        "mushrooms",
        "nectarine",
        "orange",
        "peach",
        "quant",
        "ripen",
        "strawberry",
        "tang",
        "up",
        "volumne",
        "when",
        "yellow",
        "zip",
        "The quick brown fox jumps over the lazy dog",
    ];

    #[rustfmt::skip]
    const OUTPUT: [(HashFn, [u32; 26]); 7] = [
        (HashFn::OneAtATime, [2297466611, 3902465932, 469785835, 1937308741, 261917617, 3785641677, 1439605128,
            1649152283, 1493851484, 1246520657, 2221159044, 1973511823, 384136800, 214358653,
            2379473940, 4269788650, 2864377005, 2638630052, 427683330, 990491717, 1747111141,
            792127364, 2599214128, 2553037199, 2509838425, 1369346549]),
        (HashFn::Md5, [3195025439, 2556848621, 3724893440, 3332385401, 245758794, 2550894432, 121710495,
            3053817768, 1250994555, 1862072655, 2631955953, 2951528551, 1451250070, 2820856945,
            2060845566, 3646985608, 2138080750, 217675895, 2230934345, 1234361223, 3968582726,
            2455685270, 1293568479, 199067604, 2042482093, 2642219166]),
        (HashFn::Crc, [10542, 22009, 14526, 19510, 19432, 10199, 20634, 9369, 11511,
            10362, 7893, 31289, 11313, 9354, 7621, 30628, 15218, 25967,
            2695, 9380, 17300, 28156, 9192, 20484, 16925, 16719]),
        (HashFn::Fnv1_64, [473199127, 4148981457, 3971873300, 3257986707, 1722477987, 2991193800, 4147007314,
            3633179701, 1805162104, 3503289120, 3395702895, 3325073042, 2345265314, 3340346032,
            2722964135, 1173398992, 2815549194, 2562818319, 224996066, 2680194749, 3035305390,
            246890365, 2395624193, 4145193337, 1801941682, 2112060110]),
        (HashFn::Fnv1a_64, [1488911807, 2500855813, 1510099634, 1390325195, 3647689787, 3241528582, 1669328060,
            2604311949, 734810122, 1516407546, 560948863, 1767346780, 561034892, 4156330026,
            3716417003, 3475297030, 1518272172, 227211583, 3938128828, 126112909, 3043416448,
            3131561933, 1328739897, 2455664041, 2272238452, 3890508048]),
        (HashFn::Fnv1_32, [67176023, 1190179409, 2043204404, 3221866419, 2567703427, 3787535528, 4147287986,
            3500475733, 344481048, 3865235296, 2181839183, 119581266, 510234242, 4248244304,
            1362796839, 103389328, 1449620010, 182962511, 3554262370, 3206747549, 1551306158,
            4127558461, 1889140833, 2774173721, 1180552018, 3922226286]),
        (HashFn::Fnv1a_32, [280767167, 2421315013, 3072375666, 855001899, 459261019, 3521085446, 18738364,
            1625305005, 2162232970, 777243802, 3323728671, 132336572, 3654473228, 260679466,
            1169454059, 2698319462, 1062177260, 235516991, 2218399068, 405302637, 1128467232,
            3579622413, 2138539289, 96429129, 2877453236, 76545936]),
    ];

    #[test]
    fn libhashkit_vectors() {
        for (f, want) in OUTPUT {
            for (key, want) in INPUT.iter().zip(want) {
                assert_eq!(f.hash(key.as_bytes()), want, "{} of {key:?}", f.name());
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for (f, _) in OUTPUT {
            assert_eq!(f.name().parse::<HashFn>(), Ok(f));
        }
        assert!("hsieh".parse::<HashFn>().is_err());
    }

    #[test]
    fn high_bytes_are_sign_extended_like_libhashkit() {
        // Standard FNV-1a-32 of [0x80] would be (INIT ^ 0x80) * PRIME.
        let standard = (FNV_32_INIT ^ 0x80).wrapping_mul(FNV_32_PRIME);
        assert_ne!(fnv1a_32(&[0x80]), standard);
        assert_eq!(
            fnv1a_32(&[0x80]),
            (FNV_32_INIT ^ 0xffff_ff80).wrapping_mul(FNV_32_PRIME)
        );
    }
}
