//! Tauri's build step (embeds dist/ and the config), as in the template.

fn main() {
    tauri_build::build();
}
