//! Typed params and results, one file per method family. Field names follow the wire
//! (camelCase for ACP's, snake_case where the `_lembas` extension uses it).

pub mod card;
pub mod event;
pub mod events;
pub mod handshake;
pub mod session;
pub mod terminal;

/// Decode a tagged shape in one pass: `F` holds every variant's fields as options, and
/// `pick` builds the variant its tag names, or says which field does not fit it (one it lacks,
/// or one it does not take). Both run inside the object's own visit, so an error is placed at
/// that object (its path is `prompt[1]`, not the array around it).
pub(crate) fn one_pass<'de, D, F, T>(
    d: D,
    expecting: &'static str,
    pick: fn(F) -> Result<T, Misfit>,
) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    F: serde::Deserialize<'de>,
{
    struct Flat<F, T> {
        expecting: &'static str,
        pick: fn(F) -> Result<T, Misfit>,
    }
    impl<'de, F: serde::Deserialize<'de>, T> serde::de::Visitor<'de> for Flat<F, T> {
        type Value = T;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str(self.expecting)
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            let fields = F::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
            (self.pick)(fields).map_err(|m| match m {
                Misfit::Missing(field) => serde::de::Error::missing_field(field),
                Misfit::Stray(field) => serde::de::Error::custom(format_args!(
                    "unknown field `{field}` for this kind of {}",
                    self.expecting
                        .trim_start_matches("an ")
                        .trim_start_matches("a ")
                )),
            })
        }
    }
    d.deserialize_map(Flat { expecting, pick })
}

/// A field that does not fit the variant [`one_pass`] picked.
#[derive(Debug)]
pub(crate) enum Misfit {
    /// The variant needs it and it is not there.
    Missing(&'static str),
    /// It is there and belongs to another variant.
    Stray(&'static str),
}

impl From<&'static str> for Misfit {
    fn from(field: &'static str) -> Misfit {
        Misfit::Missing(field)
    }
}

/// A variant's field, or its name for [`one_pass`]'s "missing field" error.
pub(crate) fn need<T>(v: Option<T>, field: &'static str) -> Result<T, &'static str> {
    v.ok_or(field)
}

/// Refuse a field given (`present`: each field's name and whether it was given) that the
/// picked variant does not take (not in `takes`).
pub(crate) fn only(present: &[(&'static str, bool)], takes: &[&str]) -> Result<(), Misfit> {
    match present
        .iter()
        .find(|(name, given)| *given && !takes.contains(name))
    {
        Some((name, _)) => Err(Misfit::Stray(name)),
        None => Ok(()),
    }
}
