//! Typed params and results, one file per method family. Field names follow the wire
//! (camelCase for ACP's, snake_case where the `_lembas` extension uses it).

pub mod card;
pub mod handshake;
pub mod session;
pub mod terminal;

/// Decode a tagged shape in one pass: `F` holds every variant's fields as options, and
/// `pick` builds the variant its tag names, or gives the name of a field that variant lacks.
/// Both run inside the object's own visit, so an error is placed at that object (its path is
/// `prompt[1]`, not the array around it).
pub(crate) fn one_pass<'de, D, F, T>(
    d: D,
    expecting: &'static str,
    pick: fn(F) -> Result<T, &'static str>,
) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    F: serde::Deserialize<'de>,
{
    struct Flat<F, T> {
        expecting: &'static str,
        pick: fn(F) -> Result<T, &'static str>,
    }
    impl<'de, F: serde::Deserialize<'de>, T> serde::de::Visitor<'de> for Flat<F, T> {
        type Value = T;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str(self.expecting)
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            let fields = F::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
            (self.pick)(fields).map_err(serde::de::Error::missing_field)
        }
    }
    d.deserialize_map(Flat { expecting, pick })
}

/// A variant's field, or its name for [`one_pass`]'s "missing field" error.
pub(crate) fn need<T>(v: Option<T>, field: &'static str) -> Result<T, &'static str> {
    v.ok_or(field)
}
