/*
 * spin.h - the pause a spinning loop takes between two looks at what it
 * waits for (the engine's lock retries, the server's busy polling).
 * Internal to emdb; header only.
 */
#ifndef EMDB_SPIN_H
#define EMDB_SPIN_H

/* A hint to the core that this is a spin-wait: on x86 PAUSE, which lets
 * the sibling hyperthread run and avoids the memory-order flush when the
 * loop ends.  Nothing elsewhere. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

#endif
