//! The session layer's model check at the CI bound (`coxswain_checker::check_session`): every
//! property holds and every situation is reached, over a pinned number of states.

use coxswain_checker::{check_session, SessionBound};

#[test]
fn the_session_model_at_the_ci_bound_every_property_holds_and_is_reached() {
    let start = std::time::Instant::now();
    let report = check_session(SessionBound::CI, 2, None);
    let broken: Vec<_> = report.properties.iter().filter(|p| !p.ok).collect();
    assert!(broken.is_empty(), "{broken:#?}");
    assert!(report.exhaustive);
    println!("{} states in {:?}", report.unique_states, start.elapsed());
    assert_eq!(report.unique_states, 482_804);
}
