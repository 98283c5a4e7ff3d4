//! A pipeline statement's condition (Hrana's step conditions): over the outcomes of
//! earlier statements of the same batch, by index.
use ferry_proto::ferry::v1alpha1::condition::Condition as Kind;
use ferry_proto::ferry::v1alpha1::Condition;

/// How an earlier statement ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Failed,
    Skipped,
}

/// Deepest nesting accepted (the request is bounded anyway; this bounds recursion).
pub const MAX_DEPTH: usize = 16;

/// Why a condition cannot be evaluated for statement `at`.
pub fn check(c: &Condition, at: usize) -> Result<(), String> {
    check_depth(c, at, 0)
}

fn check_depth(c: &Condition, at: usize, depth: usize) -> Result<(), String> {
    if depth >= MAX_DEPTH {
        return Err(format!(
            "statement {at}: condition nested deeper than {MAX_DEPTH}"
        ));
    }
    match &c.condition {
        None => Err(format!("statement {at}: empty condition")),
        Some(Kind::Ok(i)) | Some(Kind::Error(i)) if *i as usize >= at => Err(format!(
            "statement {at}: a condition may only name an earlier statement (it names {i})"
        )),
        Some(Kind::Ok(_)) | Some(Kind::Error(_)) => Ok(()),
        Some(Kind::Not(inner)) => check_depth(inner, at, depth + 1),
        Some(Kind::All(cs)) | Some(Kind::Any(cs)) => cs
            .conditions
            .iter()
            .try_for_each(|c| check_depth(c, at, depth + 1)),
    }
}

/// Whether the condition holds, given the outcomes of the statements before it (a
/// skipped statement neither succeeded nor failed). Call after [`check`].
pub fn holds(c: &Condition, before: &[Outcome]) -> bool {
    let at = |i: &u32| before.get(*i as usize).copied();
    match &c.condition {
        None => false,
        Some(Kind::Ok(i)) => at(i) == Some(Outcome::Ok),
        Some(Kind::Error(i)) => at(i) == Some(Outcome::Failed),
        Some(Kind::Not(inner)) => !holds(inner, before),
        Some(Kind::All(cs)) => cs.conditions.iter().all(|c| holds(c, before)),
        Some(Kind::Any(cs)) => cs.conditions.iter().any(|c| holds(c, before)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_proto::ferry::v1alpha1::Conditions;

    fn ok(i: u32) -> Condition {
        Condition {
            condition: Some(Kind::Ok(i)),
        }
    }
    fn err(i: u32) -> Condition {
        Condition {
            condition: Some(Kind::Error(i)),
        }
    }
    fn not(c: Condition) -> Condition {
        Condition {
            condition: Some(Kind::Not(Box::new(c))),
        }
    }
    fn all(cs: Vec<Condition>) -> Condition {
        Condition {
            condition: Some(Kind::All(Conditions { conditions: cs })),
        }
    }
    fn any(cs: Vec<Condition>) -> Condition {
        Condition {
            condition: Some(Kind::Any(Conditions { conditions: cs })),
        }
    }

    #[test]
    fn conditions_read_earlier_outcomes() {
        use Outcome::*;
        let before = [Ok, Failed, Skipped];
        assert!(holds(&ok(0), &before));
        assert!(!holds(&ok(1), &before));
        assert!(holds(&err(1), &before));
        // Skipped: neither.
        assert!(!holds(&ok(2), &before) && !holds(&err(2), &before));
        assert!(holds(&not(ok(2)), &before));
        assert!(holds(&all(vec![ok(0), err(1)]), &before));
        assert!(!holds(&all(vec![ok(0), ok(1)]), &before));
        assert!(holds(&any(vec![ok(1), ok(0)]), &before));
        assert!(holds(&all(vec![]), &before) && !holds(&any(vec![]), &before));
    }

    #[test]
    fn only_earlier_statements_and_bounded_depth() {
        assert!(check(&ok(0), 1).is_ok());
        assert!(check(&ok(1), 1).is_err(), "itself");
        assert!(
            check(&all(vec![ok(0), err(3)]), 2).is_err(),
            "a later one, nested"
        );
        assert!(check(&Condition { condition: None }, 1).is_err());
        let mut deep = ok(0);
        for _ in 0..MAX_DEPTH {
            deep = not(deep);
        }
        assert!(check(&deep, 1).is_err());
    }
}
