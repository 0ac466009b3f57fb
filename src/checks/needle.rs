//! The needle check of a context ladder's rung: the answer must give back the fact hidden in
//! the prompt, a six-digit code tied to a name. A missing or wrong code is `pattern_mismatch`.

/// A fact hidden in a prompt, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Needle {
    pub name: String,
    /// Six digits.
    pub code: String,
    /// How far into the document the fact sits, in percent.
    pub depth_percent: u8,
}

impl Needle {
    /// Whether `text` gives the code back: as a number of its own, not inside a longer one.
    pub fn found_in(&self, text: &str) -> bool {
        text.split(|c: char| !c.is_ascii_digit())
            .any(|run| run == self.code)
    }

    /// Why the answer failed, in one sentence; the answer quoted when it may be.
    pub fn sentence(&self, text: &str, show_text: bool) -> String {
        let said = if show_text {
            format!(": {:?}", crate::util::one_line(text, 80))
        } else {
            String::new()
        };
        format!(
            "expected the code {} for {} ({}% into the document), the answer did not contain it{said}",
            self.code, self.name, self.depth_percent
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_must_stand_as_a_number_of_its_own() {
        let n = Needle {
            name: "Alvarez".into(),
            code: "482913".into(),
            depth_percent: 37,
        };
        assert!(n.found_in("The access code for Alvarez is 482913."));
        assert!(n.found_in("482913"));
        assert!(!n.found_in("The code is 4829130."));
        assert!(!n.found_in("The code is 482 913."));
        assert!(!n.found_in("I could not find it."));
        assert_eq!(
            n.sentence("no idea", false),
            "expected the code 482913 for Alvarez (37% into the document), the answer did not contain it"
        );
        assert!(n.sentence("no idea", true).ends_with(": \"no idea\""));
    }
}
