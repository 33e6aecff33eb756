/*
 * device_peak.h - the peak dense BF16 FLOP/s of a GPU, by its name.
 *
 * MFU needs the peak of the GPU a job ran on. The trace names it (the
 * device record, format 1.5, or a PyTorch profiler trace's
 * deviceProperties); this table turns the name into the dense (not the
 * with-sparsity) BF16 Tensor Core peak of the vendor's datasheet. A name
 * the table does not know has no peak: MFU is then unknown unless
 * --peak-flops gives one, never guessed from a neighbour.
 */
#ifndef FSS_COLLECTOR_DEVICE_PEAK_H
#define FSS_COLLECTOR_DEVICE_PEAK_H

/* One GPU model of the table. */
struct device_peak {
	const char *model;  /* "H100 SXM", "H100 PCIe", "H200", "A100 SXM", ... */
	double bf16_flops;  /* dense BF16 Tensor Core FLOP/s of one GPU */
	const char *source; /* the document the figure is from */
	int kineto_only;    /* 1: matched only on a Kineto trace's device name (not a CUDA device: the agent never
	                       names it) */
};

/*
 * device_peak_find - the table's entry for a device name as CUDA reports
 * it ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA A100-SXM4-80GB",
 * "NVIDIA H200", "NVIDIA B200") or as a Kineto trace's deviceProperties
 * give it (from_kineto 1: also "AMD Instinct MI300X"). NULL for a name it
 * cannot tell apart (a bare "NVIDIA H100": SXM or PCIe?), one it does not
 * know (H100 NVL, GB200, L40S, ...), NULL or "".
 */
const struct device_peak *device_peak_find(const char *name, int from_kineto);

#endif
