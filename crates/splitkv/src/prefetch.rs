//! Software prefetch: asks the CPU to start loading memory that code will reach soon.
//!
//! A hint only: it never faults, reads nothing into the program and may be dropped. It pays
//! where the hardware prefetcher cannot guess the next address: a linked node (a memtable
//! cursor's next one), a scattered word (a survey's live-map marks) or a scattered record (a
//! scan's next values in the log).

/// Bytes per cache line on the CPUs this is tuned for.
pub(crate) const LINE: usize = 64;

/// Asks for the `lines` cache lines from `start` on. Any address is allowed: nothing is read.
pub(crate) fn cache_lines_at(start: *const u8, lines: usize) {
    #[cfg(target_arch = "x86_64")]
    for line in 0..lines {
        #[allow(unsafe_code)]
        // SAFETY: a prefetch is a hint: it never faults and reads nothing into the program,
        // whatever the address (`wrapping_add` makes no claim about the allocation either).
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                start.wrapping_add(line * LINE).cast::<i8>(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, lines);
}
