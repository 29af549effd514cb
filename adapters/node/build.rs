//! Links the cdylib as a Node addon (napi-rs).
fn main() {
    napi_build::setup();
}
