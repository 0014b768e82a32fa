/*
 * harness.h — a tiny C test harness. Each TEST runs in-process; CHECK records a
 * failure and goes on; REQUIRE records a failure and leaves the test. The binary
 * ends with "# <name>: N passed, N failed" and exits non-zero on any failure.
 * Arguments, when given, select tests by name.
 */
#ifndef STRATA_HARNESS_H
#define STRATA_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/** Declare a test: TEST(name) { ... } then RUN(name) from main. */
#define TEST(name) static void name(void)

static int harness_passed, harness_failed, harness_cur_failed;
static int harness_argc;
static char **harness_argv;

#define CHECK(cond)                                                                     \
	do {                                                                            \
		if (!(cond)) {                                                          \
			fprintf(stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			harness_cur_failed = 1;                                         \
		}                                                                       \
	} while (0)

#define REQUIRE(cond)                                                                   \
	do {                                                                            \
		if (!(cond)) {                                                          \
			fprintf(stderr, "  %s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond); \
			harness_cur_failed = 1;                                         \
			return;                                                         \
		}                                                                       \
	} while (0)

/** CHECK that an int expression equals want, printing both on failure. */
#define CHECK_EQ(expr, want)                                                            \
	do {                                                                            \
		long long got_ = (long long)(expr), want_ = (long long)(want);          \
		if (got_ != want_) {                                                    \
			fprintf(stderr, "  %s:%d: CHECK_EQ failed: %s = %lld, want %lld\n", \
				__FILE__, __LINE__, #expr, got_, want_);                \
			harness_cur_failed = 1;                                         \
		}                                                                       \
	} while (0)

#define REQUIRE_EQ(expr, want)                                                          \
	do {                                                                            \
		long long got_ = (long long)(expr), want_ = (long long)(want);          \
		if (got_ != want_) {                                                    \
			fprintf(stderr, "  %s:%d: REQUIRE_EQ failed: %s = %lld, want %lld\n", \
				__FILE__, __LINE__, #expr, got_, want_);                \
			harness_cur_failed = 1;                                         \
			return;                                                         \
		}                                                                       \
	} while (0)

static int
harness_selected(const char *name)
{
	if (harness_argc <= 1)
		return 1;
	for (int i = 1; i < harness_argc; i++)
		if (strcmp(harness_argv[i], name) == 0)
			return 1;
	return 0;
}

#define RUN(fn)                                                                         \
	do {                                                                            \
		if (!harness_selected(#fn))                                             \
			break;                                                          \
		harness_cur_failed = 0;                                                 \
		fn();                                                                   \
		if (harness_cur_failed) {                                               \
			harness_failed++;                                               \
			printf("not ok - %s\n", #fn);                                   \
		} else {                                                                \
			harness_passed++;                                               \
			printf("ok - %s\n", #fn);                                       \
		}                                                                       \
		fflush(stdout);                                                         \
	} while (0)

#define HARNESS_BEGIN(argc, argv)                                                       \
	do {                                                                            \
		harness_argc = (argc);                                                  \
		harness_argv = (argv);                                                  \
		setvbuf(stdout, NULL, _IOLBF, 0);                                       \
	} while (0)

#define HARNESS_END(name)                                                               \
	(printf("# %s: %d passed, %d failed\n", (name), harness_passed, harness_failed), \
	 harness_failed ? 1 : 0)

/** A fresh temporary directory under $TMPDIR (or /tmp); the caller owns it. */
static inline char *
harness_tmpdir(const char *tag)
{
	const char *base = getenv("TMPDIR");
	char tmpl[512];
	snprintf(tmpl, sizeof(tmpl), "%s/strata-%s-XXXXXX", base ? base : "/tmp", tag);
	char *d = mkdtemp(tmpl);
	return d ? strdup(d) : NULL;
}

/** Remove a directory tree (best effort). */
static inline void
harness_rmrf(const char *dir)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "  warning: could not remove %s\n", dir);
}

#endif
