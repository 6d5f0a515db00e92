/* The library devstream loads in the plugin_loader fuzz target: InitPlugin forwards to the
 * function the fuzz target installs in this copy (each copy of the file is an image of its own,
 * with its own target), so that every table function lives in the instrumented fuzz binary. */
struct CustomRuntimeParams;
typedef void (*devstream_fuzz_init_fn)(void *context, struct CustomRuntimeParams *params);

static devstream_fuzz_init_fn target;
static void *target_context;

void devstream_fuzz_shim_install(devstream_fuzz_init_fn init, void *context) {
    target = init;
    target_context = context;
}

void InitPlugin(struct CustomRuntimeParams *params) {
    if (target) {
        target(target_context, params);
    }
}
