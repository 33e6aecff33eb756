/*
 * attach_elf.c - finding the libnccl a process maps and the file offsets
 * of its entry points (attach.h), without libbpf.
 *
 * The library is read through /proc/PID/root so that a job in a container
 * resolves its own file, not the host's file of the same name. Symbols
 * come from .dynsym (what the dynamic linker binds, always present in a
 * shared object), else .symtab; ncclX is preferred to pncclX, which in a
 * real libnccl are the same address (ncclX is a weak alias). A uprobe is
 * placed at a file offset, so every st_value is translated through the
 * executable PT_LOAD segment that holds it.
 *
 * Every read of the file is bounds-checked against its size: a truncated
 * or hostile ELF yields -ENOEXEC, never a read past the mapping.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/bpf/attach.h"

/* The functions of enum attach_fn: their short name and the two symbols
 * that may define them, in order of preference. */
static const struct {
	const char *name;
	const char *symbol;
	const char *profiling_symbol;
} attach_fn_table[ATTACH_FN_MAX] = {
    [ATTACH_FN_ALLGATHER] = {"AllGather", "ncclAllGather", "pncclAllGather"},
    [ATTACH_FN_REDUCESCATTER] = {"ReduceScatter", "ncclReduceScatter", "pncclReduceScatter"},
    [ATTACH_FN_ALLREDUCE] = {"AllReduce", "ncclAllReduce", "pncclAllReduce"},
    [ATTACH_FN_BROADCAST] = {"Broadcast", "ncclBroadcast", "pncclBroadcast"},
    [ATTACH_FN_BCAST] = {"Bcast", "ncclBcast", "pncclBcast"},
    [ATTACH_FN_REDUCE] = {"Reduce", "ncclReduce", "pncclReduce"},
    [ATTACH_FN_SEND] = {"Send", "ncclSend", "pncclSend"},
    [ATTACH_FN_RECV] = {"Recv", "ncclRecv", "pncclRecv"},
    [ATTACH_FN_ALLTOALL] = {"AlltoAll", "ncclAlltoAll", "pncclAlltoAll"},
    [ATTACH_FN_GATHER] = {"Gather", "ncclGather", "pncclGather"},
    [ATTACH_FN_SCATTER] = {"Scatter", "ncclScatter", "pncclScatter"},
    [ATTACH_FN_GROUP_START] = {"GroupStart", "ncclGroupStart", "pncclGroupStart"},
    [ATTACH_FN_GROUP_END] = {"GroupEnd", "ncclGroupEnd", "pncclGroupEnd"},
    [ATTACH_FN_COMM_INIT_RANK] = {"CommInitRank", "ncclCommInitRank", "pncclCommInitRank"},
    [ATTACH_FN_COMM_INIT_RANK_CONFIG] = {"CommInitRankConfig", "ncclCommInitRankConfig", "pncclCommInitRankConfig"},
    [ATTACH_FN_COMM_INIT_ALL] = {"CommInitAll", "ncclCommInitAll", "pncclCommInitAll"},
    [ATTACH_FN_COMM_INIT_RANK_SCALABLE] = {"CommInitRankScalable", "ncclCommInitRankScalable",
					   "pncclCommInitRankScalable"},
    [ATTACH_FN_COMM_SPLIT] = {"CommSplit", "ncclCommSplit", "pncclCommSplit"},
    [ATTACH_FN_COMM_SHRINK] = {"CommShrink", "ncclCommShrink", "pncclCommShrink"},
    [ATTACH_FN_COMM_DESTROY] = {"CommDestroy", "ncclCommDestroy", "pncclCommDestroy"},
    [ATTACH_FN_COMM_ABORT] = {"CommAbort", "ncclCommAbort", "pncclCommAbort"},
    [ATTACH_FN_COMM_FINALIZE] = {"CommFinalize", "ncclCommFinalize", "pncclCommFinalize"},
    [ATTACH_FN_PROCESS_EXIT] = {"ProcessExit", NULL, NULL},
};

const char *attach_fn_name(unsigned fn)
{
	if (fn == 0 || fn >= ATTACH_FN_MAX)
		return "?";
	return attach_fn_table[fn].name;
}

/* ---- /proc/PID/maps ---- */

static const char *path_basename(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* Append name to what (", "-separated) unless it is there; "..." once full. */
static void what_append(char *what, size_t whatlen, const char *name, int *full)
{
	size_t used = strlen(what), n = strlen(name);
	const char *p = what;

	if (*full || whatlen == 0)
		return;
	while ((p = strstr(p, name)) != NULL) {
		int starts = p == what || (p >= what + 2 && p[-2] == ',' && p[-1] == ' ');
		int ends = p[n] == '\0' || p[n] == ',';

		if (starts && ends)
			return;
		p += n;
	}
	/* Keep room for ", ..." so that a cut list says it was cut. */
	if (used + (used ? 2 : 0) + n + 5 >= whatlen) {
		if (used + 5 < whatlen)
			strcat(what, used ? ", ..." : "...");
		*full = 1;
		return;
	}
	if (used)
		strcat(what, ", ");
	strcat(what, name);
}

int attach_find_nccl(pid_t pid, char *mapped, size_t mappedlen, char *opened, size_t openedlen, char *what,
		     size_t whatlen)
{
	static const char deleted[] = " (deleted)";
	char path[64], line[4096 + 256];
	int found = 0, saw_deleted = 0, full = 0;
	FILE *f;

	if (whatlen)
		what[0] = '\0';
	if (mappedlen)
		mapped[0] = '\0';
	if (openedlen)
		opened[0] = '\0';
	if (pid <= 0)
		return -ESRCH;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		char *name;
		int fields = 0;

		if (len && line[len - 1] == '\n')
			line[--len] = '\0';
		/* start-end perms offset dev inode, then the name after spaces */
		name = line;
		while (*name && fields < 5) {
			while (*name && *name != ' ')
				name++;
			while (*name == ' ')
				name++;
			fields++;
		}
		if (name[0] != '/')
			continue; /* anonymous, [heap], [vdso] ... */
		if (strncmp(path_basename(name), "libnccl.so", 10) == 0) {
			size_t nlen = strlen(name);

			if (nlen > sizeof(deleted) - 1 && strcmp(name + nlen - (sizeof(deleted) - 1), deleted) == 0) {
				/* The file the process runs was removed or replaced
				 * since: the path now names another file, or none. */
				saw_deleted = 1;
				continue;
			}
			if ((size_t)snprintf(mapped, mappedlen, "%s", name) >= mappedlen ||
			    (size_t)snprintf(opened, openedlen, "/proc/%d/root%s", (int)pid, name) >= openedlen) {
				fclose(f);
				return -ENAMETOOLONG;
			}
			found = 1;
			break;
		}
		what_append(what, whatlen, path_basename(name), &full);
	}
	if (ferror(f) && !found) {
		/* A read error on maps: the process went away, or we may not read it. */
		int e = errno;

		fclose(f);
		return e == ESRCH || e == ENOENT ? -ESRCH : -(e ? e : EIO);
	}
	fclose(f);
	if (found) {
		if (whatlen)
			what[0] = '\0';
		return 0;
	}
	if (saw_deleted) {
		/* Said first: this is why nothing could be attached. */
		char list[1024];

		snprintf(list, sizeof(list), "%s", what);
		snprintf(what, whatlen,
			 "libnccl (deleted: the file the process mapped was removed or replaced on disk, so its "
			 "probes cannot be placed by path)%s%s",
			 list[0] ? ", " : "", list);
		return -ENOENT;
	}
	/* An empty maps: a zombie, or a kernel thread. */
	if (whatlen && what[0] == '\0')
		snprintf(what, whatlen, "nothing (no file mapped: a zombie or a kernel thread?)");
	return -ENOENT;
}

/* ---- ELF ---- */

struct elf_file {
	const uint8_t *base;
	size_t size;
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh; /* e_shnum entries, in bounds */
	const Elf64_Phdr *ph; /* e_phnum entries, in bounds */
};

static int elf_in_bounds(const struct elf_file *e, uint64_t off, uint64_t len)
{
	return off <= e->size && len <= e->size - off;
}

static int elf_open(struct elf_file *e)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)e->base;

	if (e->size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_machine != EM_X86_64)
		return -ENOEXEC;
	if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_phentsize != sizeof(Elf64_Phdr) ||
	    !elf_in_bounds(e, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)) ||
	    !elf_in_bounds(e, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr)))
		return -ENOEXEC;
	/* e_shoff and e_phoff are 8-aligned in any real ELF; refuse the rest
	 * so that the casts below are aligned accesses. */
	if (eh->e_shoff % 8 || eh->e_phoff % 8)
		return -ENOEXEC;
	e->eh = eh;
	e->sh = (const Elf64_Shdr *)(e->base + eh->e_shoff);
	e->ph = (const Elf64_Phdr *)(e->base + eh->e_phoff);
	return 0;
}

/* File offset of the code at vaddr: the executable PT_LOAD segment that holds it. */
static int elf_file_offset(const struct elf_file *e, uint64_t vaddr, uint64_t *off)
{
	for (unsigned i = 0; i < e->eh->e_phnum; i++) {
		const Elf64_Phdr *p = &e->ph[i];

		if (p->p_type != PT_LOAD || !(p->p_flags & PF_X))
			continue;
		if (vaddr >= p->p_vaddr && vaddr - p->p_vaddr < p->p_filesz) {
			*off = vaddr - p->p_vaddr + p->p_offset;
			return 0;
		}
	}
	return -ENOENT;
}

/* The function of enum attach_fn that name is, and whether it is the preferred (ncclX) name. */
static unsigned fn_of_symbol(const char *name, int *preferred)
{
	if (strncmp(name, "nccl", 4) != 0 && strncmp(name, "pnccl", 5) != 0)
		return 0;
	for (unsigned fn = 1; fn < ATTACH_FN_PROCESS_EXIT; fn++) {
		if (strcmp(name, attach_fn_table[fn].symbol) == 0) {
			*preferred = 1;
			return fn;
		}
		if (strcmp(name, attach_fn_table[fn].profiling_symbol) == 0) {
			*preferred = 0;
			return fn;
		}
	}
	return 0;
}

/* Fill found[] from one symbol table section (SHT_DYNSYM or SHT_SYMTAB). */
static void elf_scan_symbols(const struct elf_file *e, uint32_t type, struct attach_symbol found[ATTACH_FN_MAX],
			     int have_preferred[ATTACH_FN_MAX])
{
	for (unsigned i = 0; i < e->eh->e_shnum; i++) {
		const Elf64_Shdr *s = &e->sh[i], *strs;
		const Elf64_Sym *syms;
		uint64_t nsyms;

		if (s->sh_type != type || s->sh_entsize != sizeof(Elf64_Sym) || s->sh_link >= e->eh->e_shnum)
			continue;
		strs = &e->sh[s->sh_link];
		if (!elf_in_bounds(e, s->sh_offset, s->sh_size) || !elf_in_bounds(e, strs->sh_offset, strs->sh_size) ||
		    s->sh_offset % 8)
			continue;
		syms = (const Elf64_Sym *)(e->base + s->sh_offset);
		nsyms = s->sh_size / sizeof(Elf64_Sym);
		for (uint64_t k = 0; k < nsyms; k++) {
			const Elf64_Sym *sym = &syms[k];
			const char *name;
			unsigned bind = ELF64_ST_BIND(sym->st_info), fn;
			int preferred = 0;
			uint64_t off;

			if (ELF64_ST_TYPE(sym->st_info) != STT_FUNC || sym->st_shndx == SHN_UNDEF ||
			    (bind != STB_GLOBAL && bind != STB_WEAK) || sym->st_name >= strs->sh_size)
				continue;
			name = (const char *)e->base + strs->sh_offset + sym->st_name;
			/* The name must end inside the string table. */
			if (!memchr(name, '\0', strs->sh_size - sym->st_name))
				continue;
			fn = fn_of_symbol(name, &preferred);
			if (fn == 0 || have_preferred[fn] || (found[fn].fn && !preferred))
				continue;
			if (elf_file_offset(e, sym->st_value, &off) != 0)
				continue;
			found[fn].fn = (uint16_t)fn;
			found[fn].name = preferred ? attach_fn_table[fn].symbol : attach_fn_table[fn].profiling_symbol;
			found[fn].address = sym->st_value;
			found[fn].file_offset = off;
			have_preferred[fn] = preferred;
		}
	}
}

int attach_resolve(const char *path, struct attach_symbol out[ATTACH_FN_MAX], size_t *n)
{
	struct attach_symbol found[ATTACH_FN_MAX];
	int have_preferred[ATTACH_FN_MAX];
	struct elf_file e = {0};
	struct stat st;
	void *map;
	int fd, rc;

	*n = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		close(fd);
		return S_ISDIR(st.st_mode) ? -EISDIR : -ENOEXEC;
	}
	/* A private read-only mapping: only the pages of the headers and the
	 * symbol tables are read, not the whole (hundreds of MB) library. */
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	rc = map == MAP_FAILED ? -errno : 0;
	close(fd);
	if (rc)
		return rc;
	e.base = map;
	e.size = (size_t)st.st_size;
	rc = elf_open(&e);
	if (rc == 0) {
		memset(found, 0, sizeof(found));
		memset(have_preferred, 0, sizeof(have_preferred));
		elf_scan_symbols(&e, SHT_DYNSYM, found, have_preferred);
		/* .symtab only for what .dynsym lacks (a stripped-of-dynsym or
		 * static-PIE object); a stripped library has no .symtab at all. */
		elf_scan_symbols(&e, SHT_SYMTAB, found, have_preferred);
		for (unsigned fn = 1; fn < ATTACH_FN_PROCESS_EXIT; fn++)
			if (found[fn].fn)
				out[(*n)++] = found[fn];
	}
	munmap(map, e.size);
	return rc;
}
