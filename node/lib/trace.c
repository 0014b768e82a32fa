/*
 * trace.c — the event trace's hash.
 */
#include "trace.h"

uint64_t
trace_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

void
trace_create(struct trace *t)
{
	pthread_mutex_init(&t->mu, NULL);
	t->hash = 0x6a09e667f3bcc908ull;
	t->events = 0;
	t->sink = NULL;
	t->sink_ctx = NULL;
}

void
trace_set_sink(struct trace *t, void (*fn)(void *ctx, enum trace_event kind, const uint64_t *v, unsigned n),
	       void *ctx)
{
	pthread_mutex_lock(&t->mu);
	t->sink = fn;
	t->sink_ctx = ctx;
	pthread_mutex_unlock(&t->mu);
}

void
trace_destroy(struct trace *t)
{
	pthread_mutex_destroy(&t->mu);
}

void
trace_event(struct trace *t, enum trace_event kind, const uint64_t *v, unsigned n)
{
	if (t == NULL)
		return;
	uint64_t h = trace_mix((uint64_t)kind + 0x9e3779b97f4a7c15ull * (n + 1));
	for (unsigned i = 0; i < n; i++)
		h = trace_mix(h ^ (v[i] + 0x9e3779b97f4a7c15ull * (i + 1)));
	pthread_mutex_lock(&t->mu);
	t->hash = trace_mix(t->hash ^ h) + t->events;
	t->events++;
	if (t->sink != NULL)
		t->sink(t->sink_ctx, kind, v, n);
	pthread_mutex_unlock(&t->mu);
}

uint64_t
trace_hash(struct trace *t, uint64_t *events)
{
	pthread_mutex_lock(&t->mu);
	uint64_t h = t->hash;
	if (events != NULL)
		*events = t->events;
	pthread_mutex_unlock(&t->mu);
	return h;
}
