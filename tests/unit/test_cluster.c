/*
 * test_cluster.c — the parts of node/cluster that need no etcd: placement by rendezvous
 * hashing (stable, balanced, and a join moves only the shards the new member takes), the
 * --cluster URL and the node id. tests/cluster/cluster.sh runs the rest against a real
 * etcd and Azurite.
 */
#include <stdio.h>
#include <string.h>

#include "../../node/cluster/cluster.h"
#include "../../node/cluster/etcd.h"
#include "../../node/lib/diag.h"
#include "harness.h"

#define NSHARDS 4096u

TEST(rendezvous_is_stable_balanced_and_a_join_moves_only_what_the_new_member_takes)
{
	const char *three[] = {"node-a", "node-b", "node-c"};
	const char *four[] = {"node-a", "node-b", "node-c", "node-d"};
	/* Another order of the same members: the same owners (the order is not an input). */
	const char *shuffled[] = {"node-c", "node-a", "node-b"};
	unsigned count[4] = {0}, moved = 0, moved_wrong = 0, order_differs = 0;
	for (uint32_t s = 0; s < NSHARDS; s++) {
		int o3 = cluster_desired(three, 3, s), o4 = cluster_desired(four, 4, s);
		CHECK_EQ(cluster_desired(three, 3, s), o3);
		if (strcmp(three[o3], shuffled[cluster_desired(shuffled, 3, s)]) != 0)
			order_differs++;
		count[o4]++;
		if (strcmp(three[o3], four[o4]) != 0) {
			moved++;
			if (o4 != 3)
				moved_wrong++; /* a shard moved between two old members */
		}
	}
	CHECK_EQ(order_differs, 0u);
	CHECK_EQ(moved_wrong, 0u);
	CHECK_EQ(moved, count[3]);
	/* Each of 4 members owns about a quarter: within 20% of NSHARDS/4. */
	for (int i = 0; i < 4; i++) {
		CHECK(count[i] > NSHARDS / 4 * 8 / 10);
		CHECK(count[i] < NSHARDS / 4 * 12 / 10);
	}
	CHECK_EQ(cluster_desired(three, 0, 7), -1);
	CHECK_EQ(cluster_desired(three, 1, 7), 0);
}

TEST(cluster_url_names_endpoints_and_prefix)
{
	char e[256], p[256];
	CHECK_EQ(cluster_parse_url("etcd://127.0.0.1:2379", e, sizeof(e), p, sizeof(p)), 0);
	CHECK(strcmp(e, "127.0.0.1:2379") == 0);
	CHECK(strcmp(p, CLUSTER_DEFAULT_PREFIX) == 0);
	CHECK_EQ(cluster_parse_url("etcd://h1:1,h2:2/prod/strata/", e, sizeof(e), p, sizeof(p)), 0);
	CHECK(strcmp(e, "h1:1,h2:2") == 0);
	CHECK(strcmp(p, "/prod/strata") == 0);
	CHECK_EQ(cluster_parse_url("http://h:1", e, sizeof(e), p, sizeof(p)), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "etcd://HOST:PORT") != NULL);
	CHECK_EQ(cluster_parse_url("etcd:///x", e, sizeof(e), p, sizeof(p)), STRATA_EINVAL);
	CHECK_EQ(cluster_check_id("node-1.a_b"), 0);
	CHECK_EQ(cluster_check_id(""), STRATA_EINVAL);
	CHECK_EQ(cluster_check_id("a/b"), STRATA_EINVAL);
	CHECK(strstr(diag_last(), "'/'") != NULL);
}

TEST(etcd_prefix_end_covers_exactly_the_prefix)
{
	struct buf b = {0};
	CHECK_EQ(etcd_prefix_end("/t/", 3, &b), 0);
	CHECK(b.len == 3 && memcmp(b.data, "/t0", 3) == 0); /* '/' + 1 == '0' */
	CHECK_EQ(etcd_prefix_end("a\xff", 2, &b), 0);
	CHECK(b.len == 1 && b.data[0] == 'b');
	buf_destroy(&b);
}

int
main(int argc, char **argv)
{
	HARNESS_BEGIN(argc, argv);
	RUN(rendezvous_is_stable_balanced_and_a_join_moves_only_what_the_new_member_takes);
	RUN(cluster_url_names_endpoints_and_prefix);
	RUN(etcd_prefix_end_covers_exactly_the_prefix);
	return HARNESS_END("test_cluster");
}
