/*
 * tests/fuzz/replay.c - run every file of the given directories (or the
 * given files) through LLVMFuzzerTestOneInput once, in name order: the
 * fuzz corpus as a regression test, built with the normal compiler and
 * sanitizers (ctest fuzz_replay_frame).  -v prints each file first, to
 * find the one that crashes.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/fuzz/fuzz.h"

static int verbose;
static long n_inputs;

static int run_file(const char *path)
{
	FILE *fp = fopen(path, "rb");
	if (!fp) {
		perror(path);
		return -1;
	}
	fseek(fp, 0, SEEK_END);
	long size = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	uint8_t *data = malloc(size > 0 ? (size_t)size : 1);
	if (!data || size < 0 || fread(data, 1, (size_t)size, fp) != (size_t)size) {
		fprintf(stderr, "%s: cannot read\n", path);
		fclose(fp);
		free(data);
		return -1;
	}
	fclose(fp);
	if (verbose)
		fprintf(stderr, "%s (%ld bytes)\n", path, size);
	LLVMFuzzerTestOneInput(data, (size_t)size);
	free(data);
	n_inputs++;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d) {
		perror(dir);
		return -1;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			char **nn = realloc(names, cap * sizeof(*names));
			if (!nn)
				abort();
			names = nn;
		}
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_names);
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		struct stat st;
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && run_file(path))
			rc = -1;
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	int rc = 0, n_args = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (!strcmp(argv[i], "-v")) {
			verbose = 1;
			continue;
		}
		n_args++;
		if (stat(argv[i], &st)) {
			perror(argv[i]);
			rc = 1;
		} else if (S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i])) {
			rc = 1;
		}
	}
	if (!n_args) {
		fprintf(stderr, "usage: %s [-v] DIR|FILE...\n", argv[0]);
		return 2;
	}
	printf("replayed %ld inputs\n", n_inputs);
	if (n_inputs == 0)
		rc = 1; /* an empty corpus is a broken test, not a pass */
	return rc;
}
