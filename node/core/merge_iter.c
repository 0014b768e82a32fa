/*
 * merge_iter.c — the k-way merge of memtables and runs that scans and merges read
 * through: a heap of sources yielding each key once, with its newest version (which
 * may be a tombstone).
 * Memory is one block per run source.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "shard_int.h"


/** Load the source's current row; 1 valid, 0 exhausted, <0 error. */
static int
source_load(struct source *src)
{
	if (src->it == NULL) {
		if (!mem_iter_valid(&src->mi))
			return 0;
		mem_iter_entry(&src->mi, &src->key, &src->klen, &src->seq, &src->val, &src->vlen);
		src->kind = mem_iter_kind(&src->mi);
		return 1;
	}
	run_iter_row(src->it, &src->key, &src->klen, &src->seq, &src->val, &src->vlen);
	src->kind = run_iter_kind(src->it);
	return 1;
}

/** Move a chain past the parts that hold no key >= its start: 1 on a row, 0 when none
 *  is left, <0 on error. src->it is the current part's iterator. */
static int
source_chain_next(struct source *src)
{
	for (;;) {
		int rc = run_iter_next(src->it);
		if (rc != 0 || src->chain_left == 0)
			return rc;
		run_iter_free(src->it);
		src->it = NULL;
		struct table *t = *src->chain++;
		src->chain_left--;
		rc = run_iter_new(t->r, src->start, src->start_len, &src->it);
		if (rc)
			return rc;
	}
}

static int
source_next(struct source *src)
{
	if (src->it == NULL) {
		mem_iter_next(&src->mi);
		return source_load(src);
	}
	int rc = source_chain_next(src);
	if (rc <= 0)
		return rc;
	return source_load(src);
}

/** Heap order: key ascending, then seq descending. */
static int
source_less(const struct source *a, const struct source *b)
{
	int c = key_cmp(a->key, a->klen, b->key, b->klen);
	if (c)
		return c < 0;
	return a->seq > b->seq;
}


static void
heap_down(struct merger *m, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, min = i;
		if (l < m->n && source_less(m->heap[l], m->heap[min]))
			min = l;
		if (r < m->n && source_less(m->heap[r], m->heap[min]))
			min = r;
		if (min == i)
			return;
		struct source *t = m->heap[i];
		m->heap[i] = m->heap[min];
		m->heap[min] = t;
		i = min;
	}
}

int
merger_create(struct merger *m, uint32_t cap)
{
	memset(m, 0, sizeof(*m));
	m->all = env.calloc(cap + 1, sizeof(*m->all));
	m->heap = env.calloc(cap + 1, sizeof(*m->heap));
	if (m->all == NULL || m->heap == NULL) {
		env.free(m->all);
		env.free(m->heap);
		return diag_set(STRATA_ENOMEM, "out of memory creating a merge of %u inputs", cap);
	}
	return 0;
}

void
merger_add_mem(struct merger *m, struct mem *mem, const void *start, size_t start_len)
{
	struct source *src = &m->all[m->nall++];
	mem_iter_seek(&src->mi, mem, start, start_len);
	if (source_load(src) == 1)
		m->heap[m->n++] = src;
}

int
merger_add_run(struct merger *m, struct run_reader *r, const void *start, size_t start_len)
{
	struct source *src = &m->all[m->nall++];
	int rc = run_iter_new(r, start, start_len, &src->it);
	if (rc)
		return rc;
	rc = run_iter_next(src->it);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		source_load(src);
		m->heap[m->n++] = src;
	}
	return 0;
}

int
merger_add_runs(struct merger *m, struct table *const *tabs, uint32_t n, const void *start,
		size_t start_len)
{
	for (uint32_t i = 0; i < n;) {
		uint32_t parts = 1;
		while (tabs[i]->obj.group != 0 && i + parts < n &&
		       tabs[i + parts]->obj.group == tabs[i]->obj.group)
			parts++;
		struct source *src = &m->all[m->nall++];
		src->chain = tabs + i + 1;
		src->chain_left = parts - 1;
		src->start = start;
		src->start_len = start_len;
		int rc = run_iter_new(tabs[i]->r, start, start_len, &src->it);
		if (rc)
			return rc;
		rc = source_chain_next(src);
		if (rc < 0)
			return rc;
		if (rc == 1) {
			source_load(src);
			m->heap[m->n++] = src;
		}
		i += parts;
	}
	return 0;
}

void
merger_build(struct merger *m)
{
	for (uint32_t i = m->n / 2; i-- > 0;)
		heap_down(m, i);
}

static void
heap_push(struct merger *m, struct source *src)
{
	m->heap[m->n] = src;
	uint32_t i = m->n++;
	while (i > 0) {
		uint32_t p = (i - 1) / 2;
		if (!source_less(m->heap[i], m->heap[p]))
			break;
		struct source *t = m->heap[i];
		m->heap[i] = m->heap[p];
		m->heap[p] = t;
		i = p;
	}
}

static struct source *
heap_pop(struct merger *m)
{
	struct source *top = m->heap[0];
	m->heap[0] = m->heap[--m->n];
	heap_down(m, 0);
	return top;
}

/** Move src past every version of key (only memtables hold several versions). */
static int
source_skip_key(struct source *src, const void *key, size_t klen)
{
	int rc;
	do {
		rc = source_next(src);
	} while (rc == 1 && src->it == NULL && key_cmp(src->key, src->klen, key, klen) == 0);
	return rc;
}

void
merger_destroy(struct merger *m)
{
	for (uint32_t i = 0; i < m->nall; i++)
		run_iter_free(m->all[i].it);
	env.free(m->all);
	env.free(m->heap);
}


/** 1 and the next row, 0 at the end, <0 on error. */
int
merge_cursor_next(struct merge_cursor *c, struct source *row)
{
	int rc;
	if (c->win != NULL) {
		struct source *w = c->win;
		c->win = NULL;
		rc = source_skip_key(w, w->key, w->klen);
		if (rc < 0)
			return rc;
		if (rc == 1)
			heap_push(&c->m, w);
	}
	if (c->m.n == 0)
		return 0;
	struct source *w = heap_pop(&c->m);
	*row = *w;
	while (c->m.n > 0 && key_cmp(c->m.heap[0]->key, c->m.heap[0]->klen, row->key, row->klen) == 0) {
		struct source *t = c->m.heap[0];
		rc = source_skip_key(t, row->key, row->klen);
		if (rc < 0)
			return rc;
		if (rc == 0)
			heap_pop(&c->m);
		else
			heap_down(&c->m, 0);
	}
	c->win = w;
	return 1;
}

