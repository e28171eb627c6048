// SPDX-License-Identifier: GPL-2.0
/* Loads and attaches every program of the BPF object named on the command
 * line, prints "attached", and holds them until SIGINT or SIGTERM. The
 * links are this process's file descriptors, so its exit, however it
 * comes, detaches and frees the programs. */
#include <bpf/libbpf.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct bpf_program *prog;

	if (argc != 2) {
		fprintf(stderr, "usage: %s OBJECT.bpf.o\n", argv[0]);
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "%s: cannot load\n", argv[1]);
		return 1;
	}
	bpf_object__for_each_program(prog, obj) {
		if (!bpf_program__attach(prog)) {
			fprintf(stderr, "%s: cannot attach %s\n", argv[1], bpf_program__name(prog));
			bpf_object__close(obj);
			return 1;
		}
	}
	printf("attached\n");
	fflush(stdout);
	while (!stop)
		sleep(1); /* a signal cuts it short */
	bpf_object__close(obj);
	return 0;
}
