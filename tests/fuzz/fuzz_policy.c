/*
 * fuzz_policy.c — libFuzzer target for the policy loader (policy_new: sandboxed
 * LuaJIT state, memory limit, CPU budget, validation of the returned table), fed
 * random Lua source. Oracles beyond "no crash, leak, hang or sanitizer report": a
 * refused script gets a negative code and a message whose every line starts with the
 * script's name (name:line); an accepted one describes itself and frees cleanly.
 * Limits are smaller than a node's (16 MiB, 50 ms) so that scripts that loop or
 * allocate forever cost little; the loader must stop them all the same.
 */
#include <stdint.h>

#include "../../node/lib/diag.h"
#include "../../node/policy/policy.h"
#include "fuzz_util.h"

/** Name the scripts are loaded under. */
#define NAME "fuzz.lua"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	diag_log_sink = fuzz_quiet_sink;
	struct policy_limits lim = {16u << 20, 50};
	struct policy *p = NULL;
	int rc = policy_new(NAME, (const char *)data, size, &lim, &p);
	if (rc != 0) {
		const char *err = diag_last();
		if (rc > 0 || p != NULL)
			FUZZ_FAIL("policy_new returned %d with a policy", rc);
		if (err[0] == '\0')
			FUZZ_FAIL("a refused policy (%s) has no message", fuzz_code(rc));
		/* A message that filled the buffer ends (and, sorted, may contain) cut lines. */
		if (strlen(err) + 512 >= DIAG_MSG_MAX)
			return 0;
		for (const char *l = err; *l != '\0';) {
			if (strncmp(l, NAME, strlen(NAME)) != 0)
				FUZZ_FAIL("an error line does not start with the script name: %.200s", l);
			const char *nl = strchr(l, '\n');
			if (nl == NULL)
				break;
			l = nl + 1;
		}
		return 0;
	}
	if (p == NULL)
		FUZZ_FAIL("policy_new succeeded without a policy");
	static char desc[8192];
	struct policy_engine engine = {.merge_max_inputs = 8};
	policy_describe(p, &engine, desc, sizeof(desc));
	if (policy_settings(p) == NULL)
		FUZZ_FAIL("an accepted policy has no settings");
	for (int h = 0; h < POLICY_HOOK_COUNT; h++)
		(void)policy_has_hook(p, (enum policy_hook)h);
	policy_delete(p);
	return 0;
}
