/* Callgrind client requests for benchmarks/bench_instructions.py, called through ctypes.
 *
 * Outside valgrind each request is a few no-op instructions, so the same workload runs
 * natively too. Under `valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no`
 * the benchmark starts the instrumentation once its imports are done (they run at the
 * uninstrumented speed), turns the collection on around exactly the operations it counts,
 * and dumps one total per side.
 */
#include <valgrind/callgrind.h>

void marks_start(void) { CALLGRIND_START_INSTRUMENTATION; }

void marks_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }

void marks_dump(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }

void marks_zero(void) { CALLGRIND_ZERO_STATS; }
