#ifndef AP_SAMPLER_WAKE_H
#define AP_SAMPLER_WAKE_H

/* Makes the main thread run signum's Python handler at its next
 * bytecode boundary; callable from any thread, without the GIL, and
 * async-signal-safe. 0, or -1 where this Python cannot. */
int ap_wake_main_thread(int signum);

#endif
