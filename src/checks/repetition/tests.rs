//! The detectors on texts written to show each one, and the record's `repetition` object.

use super::*;

/// The detector that decided and its period, if it has one.
fn decided(r: &Report) -> (Option<Detector>, Option<usize>) {
    let f = r.decided();
    (
        f.map(Finding::detector),
        f.and_then(Finding::period).map(|p| p.0),
    )
}

fn flagged(text: &str) -> bool {
    analyze(text, &Thresholds::default()).degenerate()
}

/// One line per item, `line` given each item's number (from 1) and text.
fn lines(items: &[&str], line: impl Fn(usize, &str) -> String) -> String {
    items
        .iter()
        .enumerate()
        .map(|(i, x)| line(i + 1, x))
        .collect()
}

/// The rules that fired on `text`, in order, at the default thresholds.
fn rules(text: &str) -> Vec<&'static str> {
    analyze(text, &Thresholds::default())
        .findings
        .iter()
        .map(Finding::rule)
        .collect()
}

const HEALTHY: &[&str] = &[
    "The capital of France is Paris. It has been the country's political and cultural centre for centuries, and today it is home to about two million people within the city limits.",
    "法国的首都是巴黎。巴黎位于法国北部的塞纳河畔，是法国的政治、经济和文化中心，也是世界上最著名的旅游城市之一，每年吸引数千万游客。",
    "Here are the steps:\n1. Preheat the oven to 180°C.\n2. Mix the flour, sugar and eggs in a bowl.\n3. Pour the batter into a greased tin.\n4. Bake for 30 minutes.\n5. Let it cool before serving.",
    "| City | Country | Population |\n|------|---------|------------|\n| Paris | France | 2.1M |\n| Berlin | Germany | 3.6M |\n| Madrid | Spain | 3.3M |\n| Rome | Italy | 2.8M |\n| Vienna | Austria | 1.9M |",
    "```python\ndef fib(n):\n    if n < 2:\n        return n\n    a, b = 0, 1\n    for _ in range(n - 1):\n        a, b = b, a + b\n    return b\n\n\nfor i in range(10):\n    print(i, fib(i))\n```\nThis prints the first ten Fibonacci numbers.",
    "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30",
    "一、二、三、四、五、六、七、八、九、十、十一、十二、十三、十四、十五、十六、十七、十八、十九、二十",
    "{\"name\": \"Paris\", \"country\": \"France\", \"population\": 2102650, \"landmarks\": [\"Eiffel Tower\", \"Louvre\", \"Notre-Dame\"]}",
    "Yes.",
    "Ha ha ha, that's a good one!",
    "- apples\n- pears\n- plums\n- cherries\n- apricots\n- peaches\n- grapes",
    "Step 1: open the lid. Step 2: remove the filter. Step 3: rinse it under warm water. Step 4: let it dry. Step 5: put it back and close the lid.",
    "1. January\n2. February\n3. March\n4. April\n5. May\n6. June\n7. July\n8. August\n9. September\n10. October\n11. November\n12. December",
    "1\n2\n3\n4\n5\n6\n7\n8\n9\n10",
    "一、春\n二、夏\n三、秋\n四、冬",
    "```c\n}\n}\n}\n}\n}\n}\n```",
];

const DEGENERATE: &[&str] = &[
    "The capital of France is Paris. The capital of France is Paris. The capital of France is Paris. The capital of France is Paris.",
    "Paris is the capital. I think I think I think I think I think I think I think I think I think I think I think",
    "巴黎是法国的首都。我爱巴黎。我爱巴黎。我爱巴黎。我爱巴黎。我爱巴黎。我爱巴黎。",
    "好的好的好的好的好的好的好的好的好的好的好的好的",
    "the the the the the the the the the the the the the the the the the the the the the the",
    "Sure! Here is the answer:\n\nParis is nice.\nParis is nice.\nParis is nice.\nParis is nice.\nParis is nice.\nParis is nice.",
    // A numbered list whose items cycle while the counter climbs.
    "Fruits:\n1. Apple\n2. Banana\n3. Cherry\n4. Apple\n5. Banana\n6. Cherry\n7. Apple\n8. Banana\n9. Cherry\n10. Apple",
    // Two near-identical items alternating.
    "- The sun is bright.\n- The sun is very bright.\n- The sun is bright.\n- The sun is very bright.\n- The sun is bright.\n- The sun is very bright.",
    // A block under a repeated heading.
    "Colors:\n1. Red\n2. Blue\n\nColors:\n1. Red\n2. Blue\n\nColors:\n1. Red\n2. Blue\n\nColors:\n1. Red",
    "水果：\n1. 苹果\n2. 香蕉\n3. 苹果\n4. 香蕉\n5. 苹果\n6. 香蕉\n7. 苹果",
];

#[test]
fn healthy_texts_are_left_alone() {
    for t in HEALTHY {
        let r = analyze(t, &Thresholds::default());
        assert!(!r.degenerate(), "false alarm on {t:?}: {r:?}");
    }
}

#[test]
fn real_loops_are_flagged() {
    for t in DEGENERATE {
        let r = analyze(t, &Thresholds::default());
        assert!(r.degenerate(), "missed loop in {t:?}: {r:?}");
        assert!(r.measures.score > 0.3, "{r:?}");
    }
}

#[test]
fn loop_that_is_not_at_the_tail_is_caught_by_ngrams_and_compression() {
    let body = "Paris is the capital of France and the capital of France is Paris. ".repeat(8);
    let text = format!("{body}In short: Paris.");
    let r = analyze(&text, &Thresholds::default());
    assert_eq!(r.tail(), None, "{r:?}");
    assert!(r.degenerate(), "{r:?}");
}

#[test]
fn detector_names_are_the_records() {
    for d in Detector::ALL {
        assert_eq!(serde_json::to_value(d).unwrap(), d.as_str());
    }
}

#[test]
fn code_fences_headings_and_marks() {
    let t = Thresholds::default();
    // A fence that never closes opens no code block: the loop after it is read.
    let looping_list = (1..=12)
        .map(|i| format!("{i}. {}\n", ["Apple", "Pear", "Plum"][i % 3]))
        .collect::<String>();
    assert!(analyze(&format!("```json\n{looping_list}"), &t).degenerate());
    // A closed block is still code.
    let code = "```python\nx = 0\nx += 1\nx += 1\nx += 1\nx += 1\nx += 1\nx += 1\nprint(x)\n```\nThis adds one six times.";
    assert!(!analyze(code, &t).degenerate());
    // Each day under its own heading with the same tasks: sections, not a loop.
    let days = ["Monday", "Tuesday", "Wednesday", "Thursday"]
        .iter()
        .map(|d| format!("### {d}\n- Warm up for 10 minutes\n- Stretch\n- Run 5 km\n"))
        .collect::<String>();
    assert!(!analyze(&days, &t).degenerate(), "{:?}", analyze(&days, &t));
    // A table drawn in a code block ends in rule characters: no end in marks.
    let table = format!(
        "Here is the grid:\n```\n{}```\n",
        "+--+--+--+--+--+--+--+--+--+--+\n|  |  |  |  |  |  |  |  |  |  |\n".repeat(2)
    );
    assert!(
        !analyze(&table, &t).degenerate(),
        "{:?}",
        analyze(&table, &t)
    );
}

#[test]
fn each_detector_alone() {
    let t = Thresholds::default();
    // Item cycles: the period in items, and which detector decided.
    let r = analyze(DEGENERATE[6], &t);
    assert_eq!(
        r.decided(),
        Some(&Finding::ItemCycle {
            period: 3,
            items: 10
        })
    );
    assert_eq!(
        r.describe().as_deref(),
        Some("a block of 3 list items repeated 3 times")
    );
    let r = analyze(DEGENERATE[7], &t);
    assert_eq!(decided(&r), (Some(Detector::ItemCycle), Some(2)));
    let r = analyze(DEGENERATE[8], &t);
    assert_eq!(decided(&r), (Some(Detector::ItemCycle), Some(3)));
    // Tail loop: period and coverage of the repeated end.
    let r = analyze(
        "Paris is lovely. ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha",
        &t,
    );
    assert_eq!(
        r.tail(),
        Some(Tail::Repeated {
            period: 1,
            units: 22
        })
    );
    assert_eq!(
        (decided(&r).0, r.describe().as_deref()),
        (
            Some(Detector::TailLoop),
            Some("the text ends in a loop of 1 units repeated 22 times")
        )
    );
    let r = analyze("开始。我爱你我爱你我爱你我爱你我爱你我爱你我爱你", &t);
    assert!(
        matches!(r.tail(), Some(Tail::Repeated { period: 3, .. })),
        "{r:?}"
    );
    // A long passage said twice and begun a third time is a loop cut short; said twice and
    // ended, it is no tail loop (it may be a refrain), but a sentence of prose said word for
    // word again.
    let passage = "The city of Paris lies on the river Seine and has been the capital of France for a very long time. ";
    let r = analyze(&format!("Hello. {passage}{passage}The city of Paris"), &t);
    assert_eq!(decided(&r), (Some(Detector::TailLoop), Some(22)));
    let r = analyze(&format!("Hello. {passage}{passage}"), &t);
    assert_eq!(r.tail(), None);
    assert_eq!(
        r.findings,
        [Finding::RepeatedSentences {
            repeated: 1,
            sentences: 2
        }]
    );
    // Too few repeats at the end: no tail loop, even if the period is long.
    assert_eq!(
        analyze(
            "one two three four five six seven eight. one two three four five six seven eight.",
            &t
        )
        .tail(),
        None
    );
    // N-grams: a paragraph said twice over with a different ending.
    let twice = format!("{0} {0} And that is all.", HEALTHY[0]);
    let r = analyze(&twice, &t);
    assert!(
        r.measures.seq_rep_4 > 0.4 && r.measures.seq_rep_4 < 0.55,
        "{r:?}"
    );
    // Lines: the same list items again and again, in no fixed order.
    let list = [
        "Paris", "Rome", "Paris", "Oslo", "Rome", "Paris", "Rome", "Lima",
    ];
    let list = lines(&list, |n, c| format!("{n}. {c}\n"));
    let r = analyze(&list, &t);
    assert_eq!(
        (decided(&r).0, r.measures.recurring_item_ratio),
        (Some(Detector::RecurringItems), 0.75)
    );
    // A refrain is lines, not list items.
    let refrain = list.replace(". ", " is nice, ");
    assert!(!analyze(&refrain, &t).degenerate());
    // Short texts are never judged by n-grams.
    let r = analyze("Yes yes yes. No no.", &t);
    assert_eq!((r.measures.seq_rep_4, r.degenerate()), (0.0, false));
}

#[test]
fn code_answer_keys_and_schedules_are_not_loops() {
    let t = Thresholds::default();
    // Lines without markers that repeat and then stop are code (or a refrain); running to
    // the end of the text, or to a line cut off half way, they are a loop.
    let function = format!("def add_seven(x):\n{}", "    x += 1\n".repeat(7));
    assert!(!analyze(&format!("{function}    return x"), &t).degenerate());
    for looping in [function.clone(), format!("{function}    x +")] {
        let r = analyze(&looping, &t);
        assert_eq!(decided(&r), (Some(Detector::ItemCycle), Some(1)));
    }
    // An answer key repeats its answers; the same shape with items is a loop.
    let key = |a: &str, b: &str| -> String {
        (1..=8)
            .map(|i| format!("{i}. {}\n", if i % 2 == 1 { a } else { b }))
            .collect()
    };
    for (a, b) in [("True", "False"), ("Yes", "No"), ("B", "C"), ("对", "错")] {
        assert!(!analyze(&key(a, b), &t).degenerate(), "{a}/{b}");
    }
    assert!(analyze(&key("Apple", "Pear"), &t).degenerate());
    // The same tasks under each day's heading are a schedule; in one list, a loop.
    let day = "- [x] Water the plants\n- [ ] Feed the cat\n";
    let week = format!("Monday\n{day}Tuesday\n{day}Wednesday\n{day}");
    assert!(!analyze(&week, &t).degenerate());
    let r = analyze(
        &format!("Tasks:\n{}", day.repeat(2) + "- [x] Feed the cat\n" + day),
        &t,
    );
    assert_eq!(decided(&r).0, Some(Detector::RecurringItems), "{r:?}");
}

#[test]
fn ngrams_read_the_prose() {
    let t = Thresholds::default();
    // A fenced HTML list said twice is code, not a loop: its tags repeat by nature.
    let html = "<ul>\n  <li>Item1</li>\n  <li>Item2</li>\n  <li>Item3</li>\n</ul>\n";
    let page = format!("```html\n<h2>Items</h2>\n{html}<h2>Items</h2>\n{html}```\n");
    let r = analyze(&page, &t);
    assert_eq!((r.measures.seq_rep_4, r.degenerate()), (0.0, false));
    // With prose enough to judge, the prose alone is judged.
    let explained = format!("{page}{} {}", HEALTHY[0], HEALTHY[11]);
    let r = analyze(&explained, &t);
    assert!(r.measures.seq_rep_4 < 0.05 && !r.degenerate(), "{r:?}");
    // Read as prose, the tags would make over a quarter of its 4-grams repeats.
    let r = analyze(&explained.replace("```html\n", "").replace("```\n", ""), &t);
    assert!(r.measures.seq_rep_4 > 0.25, "{r:?}");
}

#[test]
fn a_list_stuck_on_two_items_or_a_text_ending_in_marks() {
    let t = Thresholds::default();
    // Two items taking turns in no fixed order, at the end of the list.
    let stuck =
        "Chile\nPeru\nYemen\nZimbabwe\nZimbabwe\nZimbabwe\nYemen\nYemen\nZimbabwe\nZimbabwe";
    let r = analyze(stuck, &t);
    assert_eq!(
        r.decided(),
        Some(&Finding::ItemCycle {
            period: 2,
            items: 8
        })
    );
    assert_eq!(
        r.describe().as_deref(),
        Some("two list items coming back 4 times")
    );
    assert!(!analyze(&format!("{stuck}\nOman\nQatar"), &t).degenerate());
    // A run of marks in any order; code that ends in a few braces is not one.
    let r = analyze(
        "你知道如何－－－－－－－－！－－－！－－！－！！！！！－－－！",
        &t,
    );
    assert_eq!(
        r.decided(),
        Some(&Finding::TailLoop(Tail::Marks { units: 26 }))
    );
    assert_eq!(
        r.describe().as_deref(),
        Some("the text ends in 26 units of punctuation and symbols alone")
    );
    assert!(!analyze("Wow！！！！！", &t).degenerate());
}

#[test]
fn every_detector_that_fired_is_kept() {
    let t = Thresholds::default();
    // A numbered list stuck on one item: item cycle, lines and a tail loop all see it.
    let r = analyze(
        &(1..=30).map(|i| format!("{i}. Fish\n")).collect::<String>(),
        &t,
    );
    let fired: Vec<Detector> = r.fired().collect();
    assert_eq!(
        fired,
        [
            Detector::ItemCycle,
            Detector::TailLoop,
            Detector::RecurringItems
        ]
    );
    assert_eq!(decided(&r).0, Some(Detector::ItemCycle));
    assert_eq!(analyze(HEALTHY[0], &t).findings, []);
}

#[test]
fn thresholds_are_honoured() {
    let t = Thresholds {
        tail_min_repeats: 10,
        tail_min_units: 200,
        list_min_repeats: 10,
        ngram_margin: 1.1,
        recurring_item_ratio: 1.1,
        sentence_min_units: 100,
        ending_min_sentences: 100,
        passage_ratio: 1.1,
        phrase_min_repeats: 100,
        ..Thresholds::default()
    };
    assert!(!analyze(DEGENERATE[0], &t).degenerate());
    assert!(flagged(DEGENERATE[0]));
    assert!(!analyze(DEGENERATE[6], &t).degenerate());
}

#[test]
fn a_loop_is_certain_at_twice_the_thresholds() {
    let t = Thresholds::default();
    let looping = |n: usize| format!("Hello. {}", "I think that ".repeat(n));
    assert!(analyze(&looping(8), &t).degenerate());
    assert!(!certain_loop(&looping(8), &t));
    assert!(certain_loop(&looping(20), &t));
    let list = |n: usize| {
        (1..=n)
            .map(|i| format!("{i}. {}\n", ["Apple", "Pear"][i % 2]))
            .collect::<String>()
    };
    assert!(!certain_loop(&list(8), &t));
    assert!(certain_loop(&list(12), &t));
    // The last line is still being written: it does not count yet.
    assert!(!certain_loop(list(12).trim_end(), &t));
}

#[test]
fn compression_ratio_separates_loops_from_prose() {
    assert!(compression_ratio(&"abc def ".repeat(50)) < 0.1);
    assert!(compression_ratio(HEALTHY[0]) > 0.6);
}

/// The `repetition` object of the result record is a public contract: it serializes byte
/// for byte as it always has, whichever detectors fired; new measures only come after.
#[test]
fn the_records_repetition_object_is_unchanged() {
    let t = Thresholds::default();
    let numbered = |items: &[&str]| lines(items, |n, x| format!("{n}. {x}\n"));
    let cases = [
        // Every detector fires; the item cycle decides.
        (
            numbered(&["Fish and chips today"; 30]),
            r#"{"score":1.0,"degenerate":true,"detector":"item_cycle","period":1,"repeats":30,"units":120,"items":30,"item_cycle_period":1,"item_cycle_items":30,"tail_loop_period":4,"tail_loop_units":120,"seq_rep_4":0.9658119658119658,"late_seq_rep_4":0.9298245614035088,"recurring_item_ratio":1.0,"compression_ratio":0.0746031746031746,"template_line_ratio":0.0,"repeated_rows":0,"clause_ending_ratio":0.0,"repeated_sentences":0,"sentence_ending_ratio":0.0,"turn_items":0,"enumeration_repeats":0}"#,
        ),
        // A tail loop decides, the n-grams agree.
        (
            format!("Hello there. {}", "Fish and chips today. ".repeat(10)),
            r#"{"score":0.9622641509433962,"degenerate":true,"detector":"tail_loop","period":5,"repeats":10,"units":53,"items":1,"item_cycle_period":null,"item_cycle_items":0,"tail_loop_period":5,"tail_loop_units":51,"seq_rep_4":0.86,"late_seq_rep_4":0.7916666666666666,"recurring_item_ratio":0.0,"compression_ratio":0.2317596566523605,"template_line_ratio":0.0,"repeated_rows":0,"clause_ending_ratio":0.0,"repeated_sentences":0,"sentence_ending_ratio":0.0,"turn_items":0,"enumeration_repeats":0}"#,
        ),
        // The text ends in marks alone: a tail loop with no period.
        (
            "你知道如何－－－－－－－－！－－－！－－！－！！！！！－－－！".to_string(),
            r#"{"score":0.8387096774193549,"degenerate":true,"detector":"tail_loop","period":null,"repeats":null,"units":31,"items":1,"item_cycle_period":null,"item_cycle_items":0,"tail_loop_period":null,"tail_loop_units":26,"seq_rep_4":0.0,"late_seq_rep_4":0.0,"recurring_item_ratio":0.0,"compression_ratio":0.5851063829787234,"template_line_ratio":0.0,"repeated_rows":0,"clause_ending_ratio":0.0,"repeated_sentences":0,"sentence_ending_ratio":0.0,"turn_items":0,"enumeration_repeats":0}"#,
        ),
        // List items coming back out of order.
        (
            numbered(&[
                "Paris", "Rome", "Paris", "Oslo", "Rome", "Paris", "Rome", "Lima",
            ]),
            r#"{"score":0.75,"degenerate":true,"detector":"lines","period":null,"repeats":null,"units":8,"items":8,"item_cycle_period":null,"item_cycle_items":0,"tail_loop_period":null,"tail_loop_units":0,"seq_rep_4":0.0,"late_seq_rep_4":0.0,"recurring_item_ratio":0.75,"compression_ratio":0.7906976744186046,"template_line_ratio":0.0,"repeated_rows":0,"clause_ending_ratio":0.0,"repeated_sentences":0,"sentence_ending_ratio":0.0,"turn_items":0,"enumeration_repeats":0}"#,
        ),
        // Nothing fires.
        (
            HEALTHY[0].to_string(),
            r#"{"score":0.0,"degenerate":false,"detector":null,"period":null,"repeats":null,"units":34,"items":1,"item_cycle_period":null,"item_cycle_items":0,"tail_loop_period":null,"tail_loop_units":0,"seq_rep_4":0.0,"late_seq_rep_4":0.0,"recurring_item_ratio":0.0,"compression_ratio":0.7556818181818182,"template_line_ratio":0.0,"repeated_rows":0,"clause_ending_ratio":0.0,"repeated_sentences":0,"sentence_ending_ratio":0.0,"turn_items":0,"enumeration_repeats":0}"#,
        ),
    ];
    for (text, want) in cases {
        let r = analyze(&text, &t);
        assert_eq!(serde_json::to_string(&r).unwrap(), want, "{text:?}");
    }
    let all = analyze(&numbered(&["Fish and chips today"; 30]), &t);
    assert_eq!(all.fired().collect::<Vec<_>>(), Detector::ALL[..4]);
}

/// The shapes exact comparison misses, each named by its rule, and the hard negatives beside
/// them left alone.
#[test]
fn templates_table_rows_and_morphemes_are_found() {
    let t = Thresholds::default();
    let counter: String = (1..=13)
        .map(|n| format!("Le décembre {n}: {}\n", n + 17))
        .collect();
    assert_eq!(rules(&counter), ["template_lines"]);
    let r = analyze(&counter, &t);
    assert_eq!(decided(&r), (Some(Detector::RecurringItems), Some(1)));
    assert_eq!(r.measures.template_line_ratio, 1.0);
    let planets = "The four outer planets:\n\n| Planet | Moons |\n|---|---|\n| Jupiter | 95 |\n| Saturn | 146 |\n| Uranus | 28 |\n| Neptune | 16 |\n\nThe four outer planets:\n\n| Planet | Moons |\n|---|---|\n| Jupiter | 95 |\n| Saturn | 146 |";
    assert_eq!(rules(planets), ["table_rows"]);
    assert_eq!(analyze(planets, &t).measures.repeated_rows, 2);
    let salad = "中国的茶文化，是一种古老茶文化，人们喜欢喝茶文化，茶叶来自茶文化，饮茶成为茶文化，泡茶讲究茶文化，茶具体现茶文化，茶馆传承茶文化。";
    assert!(rules(salad).contains(&"morphemes"), "{:?}", rules(salad));
    assert_eq!(
        analyze(salad, &t).decided().map(Finding::detector),
        Some(Detector::Morphemes)
    );
    // Tables, a plan whose days differ and a poem's refrain stay healthy.
    for healthy in [
        (1..=12)
            .map(|n| format!("{n} km = {:.2} miles\n", n as f64 * 0.621))
            .collect::<String>(),
        (1..=14)
            .map(|n| format!("December {n}: {}\n", ["skate", "bake", "read", "sing", "knit", "walk", "cook"][n % 7]))
            .collect(),
        "| Planet | Moons |\n|---|---|\n| Jupiter | 95 |\n| Saturn | 146 |\n\n| Planet | AU |\n|---|---|\n| Jupiter | 5.2 |\n| Saturn | 9.5 |".into(),
        "春风吹过山岗，\n花儿开满路旁。\n我在等你回来，\n等你回到故乡。\n\n夏雨落在池塘，\n荷叶随风摇荡。\n我在等你回来，\n等你回到故乡。\n\n秋月挂在天上，\n桂花满院飘香。\n我在等你回来，\n等你回到故乡。".into(),
    ] {
        assert!(rules(&healthy).is_empty(), "{healthy:?}: {:?}", rules(&healthy));
    }
}

/// A template need not be the whole answer: two lines in five will do, interleaved with empty
/// labels or after a few lines that differ. A letter in front counts on as the number does.
/// A label with its content under it heads that content and is no line said again.
#[test]
fn templates_among_other_lines_and_behind_letters() {
    let years: String = ["Warren G. Harding", "Woodrow Wilson", "Calvin Coolidge"]
        .iter()
        .chain(["Woodrow Wilson"; 4].iter())
        .enumerate()
        .map(|(i, p)| format!("{}: {p}\n", 1921 + i))
        .chain((1930..1939).map(|y| format!("{y}: Franklin D. Roosevelt\n")))
        .collect();
    assert_eq!(rules(&years), ["template_lines"]);
    let days: String = (1..=10)
        .map(|n| {
            let day = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"][n % 5];
            format!("Day {n}:\n• {day}:\n")
        })
        .collect();
    assert_eq!(rules(&days), ["template_lines"]);
    let letters: String = (b'A'..=b'Z')
        .enumerate()
        .map(|(i, l)| {
            let animal = ["cat", "dog", "rabbit"].get(i).unwrap_or(&"snake");
            format!("{}: {}. {animal}\n", l as char, i + 1)
        })
        .collect();
    assert_eq!(rules(&letters), ["template_lines"]);
    // A plan whose weeks each head their runs, and a dialogue, stay healthy.
    let runs = [
        "Three easy runs of 5 km.",
        "Add strides after the Tuesday run.",
        "A long run of 10 km on Sunday.",
        "Hills on Thursday, easy otherwise.",
        "Rest week: two short runs.",
        "Tempo run of 6 km on Wednesday.",
        "Intervals: 6 x 400 m.",
        "A long run of 14 km.",
        "Taper: halve the distance.",
        "Race day on Saturday.",
    ];
    let weeks = lines(&runs, |n, run| format!("Week {n}:\n{run}\n"));
    let dialogue = "A: 1. Where is the station?\nB: 2. Turn left at the bank.\nA: 3. Is it far?\nB: 4. No, five minutes on foot.\nA: 5. Thank you!\nB: 6. You are welcome.";
    for healthy in [weeks.as_str(), dialogue] {
        assert!(
            rules(healthy).is_empty(),
            "{healthy:?}: {:?}",
            rules(healthy)
        );
    }
}

/// Two items taking turns anywhere while a counter climbs, items named again and again inside
/// enumerations, and what stays healthy beside them.
#[test]
fn items_taking_turns_and_enumerations_naming_the_same_few() {
    let t = Thresholds::default();
    let names = [
        "Amazon", "Nile", "Amazon", "Amazon", "Nile", "Amazon", "Nile", "Nile",
    ];
    let rivers = lines(&names, |n, r| format!("River {n}: The {r}\n\n"))
        + "The continents of the world are:\n\nAfrica\n\nAsia\n\nEurope";
    assert_eq!(rules(&rivers), ["turns"]);
    let r = analyze(&rivers, &t);
    assert_eq!(decided(&r), (Some(Detector::ItemCycle), Some(2)));
    assert_eq!(r.measures.turn_items, 8);
    let meals = "Lunch: Chicken, Bran, Banana, Chicken, Chai\nDinner: Chicken, Bran, Bran, Banana, Bran, Banana, Banana";
    assert_eq!(rules(meals), ["enumerations"]);
    assert_eq!(analyze(meals, &t).measures.enumeration_repeats, 6);
    assert_eq!(
        analyze(meals, &t).decided().map(Finding::detector),
        Some(Detector::RecurringItems)
    );
    for healthy in [
        // A song's two lines taking turns before it goes on: no counter, no list.
        "Row, row, row your boat\nGently down the stream\nRow, row, row your boat\nGently down the stream\nRow, row, row your boat\nGently down the stream\nMerrily, merrily, merrily, merrily\nLife is but a dream".to_string(),
        // An answer key, and two rows of figures.
        (1..=8).map(|n| format!("{n}. {}\n", if n % 2 == 0 { "True" } else { "False" })).collect(),
        (1..=8).map(|n| format!("| {n} | {} |\n", 10 * (n % 2))).collect(),
        // Two-valued data: coin flips, a parity table, test results.
        (1..=8).map(|n| format!("Flip {n}: {}\n", ["Heads", "Tails", "Tails"][n % 3])).collect(),
        "| n | Parity |\n|---|---|\n".to_string()
            + &(1..=8).map(|n| format!("| {n} | {} |\n", ["Even", "Odd"][n % 2])).collect::<String>(),
        (1..=8).map(|n| format!("Test {n}: {}\n", ["PASS", "FAIL", "PASS"][n % 3])).collect(),
        // Two blocks, one after the other.
        (1..=8).map(|n| format!("Set {n}: 10 {}\n", if n <= 4 { "slow push-ups" } else { "deep squats" })).collect(),
        // Days whose content differs, and names said twice on a line by a slip.
        (1..=8).map(|n| format!("Day {n}: {}\n", ["swim", "run", "row", "climb"][n % 4])).collect(),
        "Japan: Tokyo, Osaka, Tokyo\nIndia: Mumbai, Delhi, Mumbai\nChina: Beijing, Shanghai, Beijing".into(),
    ] {
        assert!(rules(&healthy).is_empty(), "{healthy:?}: {:?}", rules(&healthy));
    }
}
