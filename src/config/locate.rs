//! Which field a parser error is about, found from the error's position: the file's YAML
//! events are read again up to that position, once, and only when a load fails. The config
//! types are deserialized without a path-tracking wrapper around each of them, which kept a
//! copy of the deserializer's code per type in the binary.

use serde_saphyr::granit_parser::{Event, Parser, StructureStyle};

use super::field::FieldPath;

/// A line and a column, both from 1, as serde-saphyr's errors give them.
pub(super) type Pos = (u64, u64);

/// A kind of node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Scalar,
    Mapping,
    Sequence,
}

/// What a parser error is about, which decides where the walk to its position ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum About {
    /// The value at the position. A block collection begins where its first node does: the
    /// error is about the innermost node there whose span is as long as the error's and which
    /// is not of the kind the parser expected instead. A key is not a value.
    Value { len: usize, expected: Option<Kind> },
    /// The key at the position: an unknown field, a duplicate key, or a value serde-saphyr
    /// put at the key of its entry (a type mismatch found by serde).
    Key,
    /// The mapping a key at the position belongs to: serde-saphyr puts an error about a
    /// whole mapping (a missing field, an enum's unknown variant) at the last key it read,
    /// or where the mapping begins.
    Mapping,
}

/// The path serde was at when it met the error at `loc`: the entries and elements being read
/// there (`targets[1].labels.env`).
pub(super) fn field_at(text: &str, loc: Pos, about: About) -> FieldPath {
    let mut walk = Walk::default();
    // Whether the last node read was a key.
    let mut after_key = false;
    let mut documents = 0;
    for item in Parser::new_from_str(text) {
        let Ok((event, span)) = item else {
            // serde-saphyr hands serde a key with its value's first event: a key the parser
            // fails right after was not read.
            if after_key {
                walk.drop_key();
            }
            break;
        };
        let Some(node) = Node::of(event) else {
            continue;
        };
        let at = (
            u64::try_from(span.start.line()).unwrap_or(u64::MAX),
            u64::try_from(span.start.col()).map_or(u64::MAX, |c| c.saturating_add(1)),
        );
        if at > loc {
            break;
        }
        after_key = false;
        let goes_on = match node {
            Node::Document => {
                documents += 1;
                // The first document was read whole: the error comes after it.
                if documents > 1 {
                    return FieldPath::root();
                }
                true
            }
            Node::Ends => walk.close(at == loc, about),
            node => match walk.read(node, (at, span.len()), loc, about) {
                Some(key) => {
                    after_key = key;
                    true
                }
                None => false,
            },
        };
        if !goes_on {
            break;
        }
    }
    walk.path(loc, about == About::Mapping)
}

enum Node {
    /// A scalar, or an alias (with no text).
    Scalar(Option<String>),
    Opens(Kind, StructureStyle),
    Ends,
    Document,
}

impl Node {
    /// The node a parser event is, if it is one: comments and the stream's own events are not.
    fn of(event: Event<'_>) -> Option<Node> {
        Some(match event {
            Event::Scalar(text, ..) => Node::Scalar(Some(text.into_owned())),
            Event::Alias(..) | Event::UnresolvedAlias(..) => Node::Scalar(None),
            Event::MappingStart(style, ..) => Node::Opens(Kind::Mapping, style),
            Event::SequenceStart(style, ..) => Node::Opens(Kind::Sequence, style),
            Event::MappingEnd | Event::SequenceEnd => Node::Ends,
            Event::DocumentStart(..) => Node::Document,
            _ => return None,
        })
    }
}

/// The collections being read, outermost first.
#[derive(Default)]
struct Walk {
    stack: Vec<Frame>,
    /// A node at the position the error can be about has begun.
    matched: bool,
}

/// A collection being read, and the entry or element in it being read.
struct Frame {
    /// Written `{...}` or `[...]`: it ends at its closing bracket, where a block collection
    /// ends where the next node begins.
    flow: bool,
    place: Place,
}

impl Frame {
    /// A collection of `kind` written in `style` opens.
    fn opening(kind: Kind, style: StructureStyle) -> Frame {
        Frame {
            flow: style == StructureStyle::Flow,
            place: match kind {
                Kind::Mapping => Place::Mapping {
                    entry: None,
                    in_value: false,
                },
                _ => Place::Sequence {
                    begun: 0,
                    open: false,
                },
            },
        }
    }
}

enum Place {
    Mapping {
        /// The entry being read: its key (`None` if the key is not a scalar) and where the
        /// key stands. `None` between entries.
        entry: Option<(Option<String>, Pos)>,
        /// Whether the entry's key has been read, so the next node is its value.
        in_value: bool,
    },
    Sequence {
        /// How many elements have begun.
        begun: usize,
        /// Whether the last of them is being read.
        open: bool,
    },
}

impl Walk {
    /// Whether the next node is a mapping's key.
    fn at_key(&self) -> bool {
        matches!(
            self.stack.last(),
            Some(Frame {
                place: Place::Mapping {
                    in_value: false,
                    ..
                },
                ..
            })
        )
    }

    /// A node begins at `at` (`key` is its text, if it is a scalar).
    fn begin(&mut self, key: Option<String>, at: Pos) {
        match self.stack.last_mut().map(|f| &mut f.place) {
            Some(Place::Mapping {
                entry,
                in_value: false,
            }) => *entry = Some((key, at)),
            Some(Place::Sequence { begun, open }) => {
                *begun += 1;
                *open = true;
            }
            _ => {}
        }
    }

    /// A scalar or a collection begins at `at`, `len` long. `None`: the error at `loc` is
    /// about what the walk has read, and the walk ends before this node. Else whether the node
    /// was a key read whole.
    fn read(
        &mut self,
        node: Node,
        (at, len): (Pos, usize),
        loc: Pos,
        about: About,
    ) -> Option<bool> {
        let kind = match node {
            Node::Scalar(_) => Kind::Scalar,
            Node::Opens(kind, _) => kind,
            Node::Ends | Node::Document => return Some(false),
        };
        let is_key = self.at_key();
        if at == loc {
            if let About::Value {
                len: want,
                expected,
            } = about
            {
                let candidate = !is_key && len == want && Some(kind) != expected;
                if is_key || (self.matched && !candidate) {
                    return None;
                }
                self.matched |= candidate;
            }
        }
        match node {
            Node::Scalar(key) => {
                self.begin(key, at);
                // A scalar ends where it begins, unless the walk ends with it.
                if at < loc {
                    self.node_done();
                    return Some(is_key);
                }
            }
            Node::Opens(kind, style) => {
                self.begin(None, at);
                self.stack.push(Frame::opening(kind, style));
            }
            Node::Ends | Node::Document => {}
        }
        Some(false)
    }

    /// The innermost collection ends, at the error's position (`at_loc`) or before it. False:
    /// the error is about a node at the position that has begun, or serde met the closing
    /// bracket at the position from inside, and the walk ends here.
    fn close(&mut self, at_loc: bool, about: About) -> bool {
        let inside = at_loc && matches!(about, About::Value { .. });
        if inside && (self.matched || self.stack.last().is_some_and(|f| f.flow)) {
            return false;
        }
        self.end();
        true
    }

    /// The innermost collection ends, which ends the node it is in.
    fn end(&mut self) {
        self.stack.pop();
        self.node_done();
    }

    /// A node of the innermost collection has been read: in a mapping, a key is followed by
    /// its value, and after the value the entry is done; in a sequence, the element is done.
    fn node_done(&mut self) {
        match self.stack.last_mut().map(|f| &mut f.place) {
            Some(Place::Mapping { entry, in_value }) => {
                if *in_value {
                    *entry = None;
                }
                *in_value = !*in_value;
            }
            Some(Place::Sequence { open, .. }) => *open = false,
            None => {}
        }
    }

    fn drop_key(&mut self) {
        if let Some(Place::Mapping { entry, .. }) = self.stack.last_mut().map(|f| &mut f.place) {
            *entry = None;
        }
    }

    /// The path of the walk. With `mapping`, an innermost entry whose key stands at `loc` is
    /// left out, which names its mapping.
    fn path(&self, loc: Pos, mapping: bool) -> FieldPath {
        let mut path = FieldPath::root();
        let last = self.stack.len().saturating_sub(1);
        for (i, frame) in self.stack.iter().enumerate() {
            match &frame.place {
                Place::Mapping {
                    entry: Some((Some(key), at)),
                    ..
                } if !(mapping && i == last && *at == loc) => path = path.key(key),
                Place::Sequence { begun, open: true } => path = path.index(begun - 1),
                _ => {}
            }
        }
        path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(len: usize, expected: Option<Kind>) -> About {
        About::Value { len, expected }
    }

    #[test]
    fn a_value_names_its_entry_and_element() {
        let text = "agent:\n  concurrency: many\ntargets:\n  - {name: t, labels: {env: [1]}}\n";
        assert_eq!(
            field_at(text, (2, 16), value(4, None)).to_string(),
            "agent.concurrency"
        );
        assert_eq!(
            field_at(text, (4, 29), value(1, None)).to_string(),
            "targets[0].labels.env"
        );
        // At a mapping's closing bracket (where the parser expected another key), the
        // mapping is named.
        assert_eq!(
            field_at(text, (4, 32), value(1, None)).to_string(),
            "targets[0].labels"
        );
        assert_eq!(
            field_at(text, (4, 33), value(1, None)).to_string(),
            "targets[0]"
        );
    }

    #[test]
    fn where_a_block_mapping_begins_with_its_first_key_what_the_error_is_about_decides() {
        let text = "targets:\n  a: b\n";
        // The mapping is the wrong kind of value: its entry is named.
        assert_eq!(
            field_at(text, (2, 3), value(0, Some(Kind::Sequence))).to_string(),
            "targets"
        );
        // The key is unknown.
        assert_eq!(field_at(text, (2, 3), About::Key).to_string(), "targets.a");
        // A field is missing from the mapping whose last key is there.
        assert_eq!(
            field_at(text, (2, 3), About::Mapping).to_string(),
            "targets"
        );
    }

    #[test]
    fn of_nodes_at_one_place_the_error_names_the_one_it_can_be_about() {
        // An indentless sequence, its first element and that element's first key all begin
        // at column 5 (a block collection's span is empty, a scalar's is not).
        let nested = "targets:\n-   - name: x\n";
        assert_eq!(
            field_at(nested, (2, 5), value(0, Some(Kind::Mapping))).to_string(),
            "targets[0]",
            "the element is a sequence where a mapping was expected"
        );
        let seq = "agent:\n-   name: x\n";
        assert_eq!(
            field_at(seq, (2, 5), value(0, Some(Kind::Mapping))).to_string(),
            "agent",
            "the value is a sequence where a mapping was expected"
        );
        let scalar = "latency:\n- 1\n";
        assert_eq!(
            field_at(scalar, (2, 3), value(1, Some(Kind::Mapping))).to_string(),
            "latency[0]"
        );
        assert_eq!(
            field_at(scalar, (2, 3), value(0, Some(Kind::Scalar))).to_string(),
            "latency"
        );
    }

    #[test]
    fn a_closing_bracket_at_the_position_was_met_from_inside() {
        let text = "api: {}\nname: x\n";
        assert_eq!(field_at(text, (1, 7), value(1, None)).to_string(), "api");
    }

    #[test]
    fn a_key_the_parser_fails_right_after_is_not_on_the_path() {
        // serde-saphyr reads a value's first event before it hands serde the key.
        let text = "name: p\ntargets:\n  - name: \"open\n";
        assert_eq!(
            field_at(text, (3, 11), value(1, None)).to_string(),
            "targets[0]"
        );
    }

    #[test]
    fn past_the_first_document_no_field_is_named() {
        let text = "name: p\n---\nname: q\n";
        assert_eq!(field_at(text, (2, 1), value(3, None)), FieldPath::root());
        assert_eq!(field_at(text, (3, 7), value(1, None)), FieldPath::root());
    }

    #[test]
    fn any_text_gives_a_path() {
        // No position, positions past the end, a text the parser refuses at once.
        for text in ["", "\t", "{", "[[[[", "a: *x", "? [a]: b\n", "- - - -"] {
            for loc in [(0, 0), (1, 1), (1, 2), (99, 1), (u64::MAX, u64::MAX)] {
                for about in [About::Key, About::Mapping, value(0, None), value(1, None)] {
                    let _ = field_at(text, loc, about);
                }
            }
        }
    }
}
