/*
 * tests/fuzz/gen_node_corpus.c - write the node-to-node seed frames
 * (node_samples.h) into a directory: `fuzz_gen_node_corpus DIR`.  Run it
 * when the node protocol changes; the seeds of tests/fuzz/corpus_node
 * came from it.
 */
#include <stdio.h>
#include <stdlib.h>

#include "protocol/proto_node.h"
#include "tests/fuzz/node_samples.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	for (int k = 0; k < NODE_SAMPLES; k++) {
		proto_node_msg m;
		static uint8_t buf[4096];
		size_t len;
		if (!node_sample(k, &m) || proto_node_encode(buf, sizeof(buf), &m, &len, NULL) != EMDB_OK) {
			fprintf(stderr, "sample %d: %s\n", k, emdb_last_error());
			return 1;
		}
		char path[4096];
		snprintf(path, sizeof(path), "%s/seed_%02d_%s_%s", argv[1], k, proto_node_op_name(m.hdr.opcode),
			 m.hdr.flags & PROTO_NODE_FLAG_RESPONSE ? "resp" : "req");
		FILE *f = fopen(path, "wb");
		if (!f || fwrite(buf, 1, len, f) != len || fclose(f)) {
			perror(path);
			return 1;
		}
	}
	return 0;
}
