//! Keys, key states and the values derived from them.
//!
//! The key space is `keys` plain keys (`k00000042`) and `groups` groups of
//! `group_size` members (`g000007/03`), all members of a group written
//! together in one batch. Each key (or group) has a *slot* in the expected
//! state: plain key `i` is slot `i`, group `g` is slot `keys + g`.
//!
//! A slot's state is a `u32`: `generation << 1 | exists`. Every write to a
//! slot takes the next generation, so a value can name the write that made
//! it: a value is `v<slot>:<generation>:` in hex followed by filler bytes
//! computed from both, so every byte of a value read back is checked.

/// A slot's state: generation and existence packed as `gen << 1 | exists`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyState(pub u32);

impl KeyState {
    /// Generation 0, absent: never written.
    pub const INITIAL: KeyState = KeyState(0);

    /// The state a write makes: the next generation, present or not.
    pub fn next(self, exists: bool) -> KeyState {
        let generation = self.generation() + 1;
        assert!(generation < 1 << 31, "generation counter overflow");
        KeyState(generation << 1 | u32::from(exists))
    }

    /// The write counter.
    pub fn generation(self) -> u32 {
        self.0 >> 1
    }

    /// True if the key holds a value in this state.
    pub fn exists(self) -> bool {
        self.0 & 1 == 1
    }
}

/// What a read saw: nothing, or a value naming its generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// No value.
    Absent,
    /// A valid value of this generation.
    Present(u32),
}

impl Observed {
    /// What a read of a key in `state` sees.
    pub fn of(state: KeyState) -> Observed {
        if state.exists() {
            Observed::Present(state.generation())
        } else {
            Observed::Absent
        }
    }
}

/// The name of plain key `index`.
pub fn key_name(index: u32) -> Vec<u8> {
    format!("k{index:08}").into_bytes()
}

/// The name of member `member` of group `group`.
pub fn group_member_name(group: u32, member: u32) -> Vec<u8> {
    format!("g{group:06}/{member:02}").into_bytes()
}

/// A key read back from the database, by where it belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParsedKey {
    /// Plain key `index`.
    Plain(u32),
    /// Member `member` of group `group`.
    Member { group: u32, member: u32 },
}

/// Parses a key name; None for anything the stress test never writes.
pub fn parse_key(key: &[u8]) -> Option<ParsedKey> {
    let s = std::str::from_utf8(key).ok()?;
    if let Some(rest) = s.strip_prefix('k') {
        (rest.len() == 8 && rest.bytes().all(|b| b.is_ascii_digit()))
            .then(|| rest.parse().ok().map(ParsedKey::Plain))
            .flatten()
    } else {
        let (g, m) = s.strip_prefix('g')?.split_once('/')?;
        if g.len() != 6 || m.len() != 2 {
            return None;
        }
        Some(ParsedKey::Member {
            group: g.parse().ok()?,
            member: m.parse().ok()?,
        })
    }
}

fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    x = (x ^ (x >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// The value written to slot `slot` at `generation` (the same for every
/// member of a group), between 19 and `19 + size_max` bytes long.
pub fn value_for(slot: u32, generation: u32, size_max: usize) -> Vec<u8> {
    let mut v = format!("v{slot:08x}:{generation:08x}:").into_bytes();
    let seed = mix(u64::from(slot) << 32 | u64::from(generation));
    let filler = (seed % (size_max as u64 + 1)) as usize;
    let mut x = seed;
    v.extend((0..filler).map(|_| {
        x = mix(x);
        b'a' + (x % 26) as u8
    }));
    v
}

/// Checks that `value` is exactly what a write to `slot` made, and returns
/// its generation; an error says what is wrong.
pub fn check_value(slot: u32, value: &[u8], size_max: usize) -> Result<u32, String> {
    let shown = || String::from_utf8_lossy(&value[..value.len().min(40)]).into_owned();
    let head = value
        .get(..19)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or_else(|| format!("value {:?} is too short or not text", shown()))?;
    let parse = |s: &str| u32::from_str_radix(s, 16).ok();
    let (Some(written_slot), Some(generation)) = (
        head.get(1..9).and_then(parse),
        head.get(10..18).and_then(parse),
    ) else {
        return Err(format!("value {:?} has no slot and generation", shown()));
    };
    if written_slot != slot {
        return Err(format!(
            "value {:?} belongs to slot {written_slot}, read from slot {slot}",
            shown()
        ));
    }
    if value != value_for(slot, generation, size_max).as_slice() {
        return Err(format!(
            "value {:?} (generation {generation}) has wrong bytes",
            shown()
        ));
    }
    Ok(generation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_damage_is_caught() {
        for (slot, generation) in [(0, 1), (7, 12345), (u32::MAX >> 1, (1 << 31) - 1)] {
            let v = value_for(slot, generation, 100);
            assert_eq!(check_value(slot, &v, 100), Ok(generation));
            assert!(check_value(slot + 1, &v, 100).is_err());
            let mut bad = v.clone();
            let last = bad.len() - 1;
            bad[last] ^= 1;
            assert!(check_value(slot, &bad, 100).is_err());
        }
    }

    #[test]
    fn keys_parse() {
        assert_eq!(parse_key(&key_name(42)), Some(ParsedKey::Plain(42)));
        assert_eq!(
            parse_key(&group_member_name(7, 3)),
            Some(ParsedKey::Member {
                group: 7,
                member: 3
            })
        );
        assert_eq!(parse_key(b"x"), None);
        assert_eq!(parse_key(b"k1"), None);
    }

    #[test]
    fn states_count_generations() {
        let s = KeyState::INITIAL.next(true).next(false).next(true);
        assert_eq!(s.generation(), 3);
        assert!(s.exists());
        assert_eq!(Observed::of(s), Observed::Present(3));
        assert_eq!(Observed::of(KeyState::INITIAL), Observed::Absent);
    }
}
