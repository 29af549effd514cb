//! The `coxswain-driver-sim` binary: runs a range of seeds and prints the totals; a bad range is a usage error.

use std::process::Command;

fn sim(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_coxswain-driver-sim"))
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[test]
fn a_range_of_seeds_prints_its_totals_and_passes() {
    let (code, stdout, stderr) = sim(&["--seeds", "10-29"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "coxswain-driver-sim: seeds 10-29");
    assert!(lines[1].starts_with("seeds: 20 (lives: "), "{stdout}");
    assert!(lines[2].starts_with("faults injected: "), "{stdout}");
    assert!(lines.contains(&"acknowledged inputs lost: 0"), "{stdout}");
    assert!(
        lines.contains(&"failed inputs found in the log: 0"),
        "{stdout}"
    );
    assert!(lines.contains(&"other violations: 0"), "{stdout}");
}

#[test]
fn one_seed_verbose_prints_the_same_digest_every_time() {
    let digest = |stdout: &str| {
        stdout
            .lines()
            .find(|line| line.starts_with("seed 42 digest "))
            .map(|line| line.split_whitespace().nth(3).unwrap_or("").to_owned())
    };
    let (code, first, _) = sim(&["--seeds", "42", "--verbose"]);
    assert_eq!(code, 0);
    let (_, second, _) = sim(&["--seeds", "42-42", "--verbose"]);
    assert!(digest(&first).is_some(), "{first}");
    assert_eq!(digest(&first), digest(&second));
}

#[test]
fn a_backwards_range_is_a_usage_error() {
    let (code, stdout, stderr) = sim(&["--seeds", "5-2"]);
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(stderr, "coxswain-driver-sim: the range 5-2 is empty\n");
    let (code, _, stderr) = sim(&["--seeds", "x-2"]);
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        "coxswain-driver-sim: `x` is not a seed number: invalid digit found in string\n"
    );
}
