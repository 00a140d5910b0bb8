//! Shapes told apart by a tag member (`{"type": "text", "text": "hi"}`), without serde's
//! buffering. serde's internally tagged enums (`#[serde(tag = "type")]`) read what they decode
//! into its `Content` tree first and build a second decoder per variant: 86 KB of the wasm
//! module. The enums of [`crate::json`] are externally tagged instead (unit variants written
//! `V {}`), and [`Tagged`] moves the tag: `{"type": "v", ...}` ⇄ `{"v": {...}}`. Those shapes go
//! through a `serde_json::Value` anyway, so moving a member costs nothing worth counting.

use serde::de::{DeserializeOwned, Error as _};
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// The member that names an enum's variant in JS.
pub trait TagName {
    const TAG: &'static str;
}

/// An externally tagged enum, read and written with its tag as a member.
pub struct Tagged<T>(pub T);

impl<T: Serialize + TagName> Serialize for Tagged<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut tagged = Map::new();
        if let Value::Object(outer) = serde_json::to_value(&self.0).map_err(S::Error::custom)? {
            for (variant, fields) in outer {
                if let Value::Object(fields) = fields {
                    tagged = fields;
                }
                tagged.insert(T::TAG.into(), Value::String(variant));
            }
        }
        Value::Object(tagged).serialize(s)
    }
}

impl<'de, T: DeserializeOwned + TagName> Deserialize<'de> for Tagged<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let Value::Object(mut fields) = Value::deserialize(d)? else {
            return Err(D::Error::custom(format!(
                "expected an object with `{}`",
                T::TAG
            )));
        };
        let variant = match fields.remove(T::TAG) {
            Some(Value::String(v)) => v,
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "`{}` must be a string, not {other}",
                    T::TAG
                )))
            }
            None => return Err(D::Error::missing_field(T::TAG)),
        };
        let mut outer = Map::new();
        outer.insert(variant, Value::Object(fields));
        T::deserialize(Value::Object(outer))
            .map(Tagged)
            .map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case", deny_unknown_fields)]
    enum Shape {
        Circle { r: u32 },
        Empty {},
    }

    impl TagName for Shape {
        const TAG: &'static str = "kind";
    }

    fn read(v: Value) -> Result<Shape, String> {
        serde_json::from_value::<Tagged<Shape>>(v)
            .map(|t| t.0)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_tag_is_a_member_both_ways() {
        let v = serde_json::to_value(Tagged(Shape::Circle { r: 2 })).unwrap();
        assert_eq!(v, json!({ "kind": "circle", "r": 2 }));
        assert_eq!(read(v).unwrap(), Shape::Circle { r: 2 });
        let v = serde_json::to_value(Tagged(Shape::Empty {})).unwrap();
        assert_eq!(v, json!({ "kind": "empty" }));
        assert_eq!(read(v).unwrap(), Shape::Empty {});
    }

    #[test]
    fn misfits_say_what_serde_would() {
        let e = read(json!({ "r": 2 })).unwrap_err();
        assert_eq!(e, "missing field `kind`");
        let e = read(json!({ "kind": "square" })).unwrap_err();
        assert!(e.starts_with("unknown variant `square`"), "{e}");
        let e = read(json!({ "kind": "circle", "r": 2, "x": 1 })).unwrap_err();
        assert!(e.starts_with("unknown field `x`"), "{e}");
        let e = read(json!({ "kind": 3 })).unwrap_err();
        assert!(e.contains("`kind` must be a string"), "{e}");
        let e = read(json!([1])).unwrap_err();
        assert!(e.contains("expected an object with `kind`"), "{e}");
    }
}
