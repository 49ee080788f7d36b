//! Serves the web view of a database that this program writes and reads
//! for a while, so the plots have something to show (the README's
//! screenshot is taken from it):
//!
//!     cargo run --release -p strata-cli --example web_demo -- /tmp/web-demo 127.0.0.1:8080 60
//!
//! Arguments: database directory (created fresh), address, seconds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use strata::{Options, DB};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().unwrap_or_else(|| "/tmp/web-demo".into());
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8080".into());
    let seconds: u64 = args.next().map_or(Ok(60), |s| s.parse())?;
    let _ = DB::destroy(&Options::default(), &dir);
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_write_buffer_size(1 << 20);
    opts.set_target_file_size_base(1 << 20);
    opts.set_max_bytes_for_level_base(4 << 20);
    let db = Arc::new(DB::open(&opts, &dir)?);
    let view = strata_cli::web::serve(db.clone(), &addr)?;
    println!("web view at http://{}/", view.addr());
    let start = Instant::now();
    let mut i = 0u64;
    while start.elapsed() < Duration::from_secs(seconds) {
        // Writes that speed up and slow down, and reads of what exists.
        let key = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) % 2_000_000).to_be_bytes();
        db.put(key, [7u8; 100])?;
        db.get(
            (i / 2)
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .rem_euclid(2_000_000)
                .to_be_bytes(),
        )?;
        if i.is_multiple_of(500) {
            let mut it = db.raw_iterator();
            it.seek(key);
            for _ in 0..50 {
                it.next();
            }
        }
        i += 1;
        if i.is_multiple_of(2000) {
            let phase = (start.elapsed().as_secs() / 5) % 3;
            std::thread::sleep(Duration::from_millis(5 * phase));
        }
    }
    drop(view);
    Ok(())
}
