/*
 * tests/fuzz/gen_corpus.c - write the hand-made seeds of the fuzz corpus
 * into a directory: every sample message of tests/fuzz/samples.h as one
 * frame ("seed_<name>"), all requests and all responses as two streams,
 * and a few classic malformations.  Run it again when the protocol changes:
 *     build/tests/fuzz/fuzz_gen_corpus tests/fuzz/corpus
 */
#include <stdio.h>
#include <string.h>

#include "tests/fuzz/samples.h"

static unsigned char frame[1 << 16];
static unsigned char streams[2][1 << 16];
static size_t stream_len[2];

static void put(const char *dir, const char *name, const void *p, size_t n)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/seed_%s", dir, name);
	FILE *fp = fopen(path, "wb");
	if (!fp || fwrite(p, 1, n, fp) != n) {
		perror(path);
		return;
	}
	fclose(fp);
}

int main(int argc, char **argv)
{
	proto_sample all[PROTO_SAMPLES_MAX];
	size_t n = proto_samples(all, PROTO_SAMPLES_MAX), len;
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	for (size_t i = 0; i < n; i++) {
		if (proto_msg_encode(frame, sizeof(frame), &all[i].h, &all[i].m, &len)) {
			fprintf(stderr, "%s: %s\n", all[i].name, emdb_last_error());
			return 1;
		}
		put(argv[1], all[i].name, frame, len);
		int dir = proto_hdr_is_response(&all[i].h);
		memcpy(streams[dir] + stream_len[dir], frame, len);
		stream_len[dir] += len;
		if (!strcmp(all[i].name, "push_req_bags")) {
			put(argv[1], "bad_truncated_push", frame, len - 8);
			frame[0] = 'X';
			put(argv[1], "bad_magic", frame, len);
			frame[0] = 'E';
			frame[4] = PROTO_VERSION_MAX + 1;
			put(argv[1], "bad_version", frame, len);
			/* A version this build speaks, but not PUSH's. */
			frame[4] = 2;
			put(argv[1], "bad_op_version", frame, len);
			frame[4] = 1;
			frame[5] = 0x40;
			put(argv[1], "bad_flags", frame, len);
			frame[5] = 0;
			frame[6] = 0x07;
			frame[7] = 0x03;
			put(argv[1], "bad_opcode", frame, len);
			/* PUSH's bags under PUSH_UPDATE (and its version): the
			 * header passes, the body is malformed. */
			frame[4] = proto_op_version(PROTO_OP_PUSH_UPDATE);
			frame[6] = PROTO_OP_PUSH_UPDATE & 0xFF;
			frame[7] = PROTO_OP_PUSH_UPDATE >> 8;
			put(argv[1], "bad_push_update_bags", frame, len);
		}
		if (!strcmp(all[i].name, "push_update_req_ids")) {
			/* A PUSH_UPDATE under version 1, which lacks it. */
			frame[4] = 1;
			put(argv[1], "bad_push_update_version_1", frame, len);
		}
		if (!strcmp(all[i].name, "table_reserve_req")) {
			/* A TABLE_RESERVE with its reserved field set, and one
			 * under version 1, which lacks it. */
			frame[PROTO_HDR_SIZE + 4] = 1;
			put(argv[1], "bad_table_reserve_reserved", frame, len);
			frame[PROTO_HDR_SIZE + 4] = 0;
			frame[4] = 1;
			put(argv[1], "bad_table_reserve_version_1", frame, len);
		}
	}
	put(argv[1], "stream_requests", streams[0], stream_len[0]);
	put(argv[1], "stream_responses", streams[1], stream_len[1]);
	printf("%zu samples written to %s\n", n, argv[1]);
	return 0;
}
