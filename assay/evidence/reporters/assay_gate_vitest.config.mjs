// The configuration the gate hands vitest (`--config`, added by assay_gate_js.cjs, loaded
// natively from the gate's folder): the project's own configuration, found as vitest finds
// it and loaded with vite's own loader, with the gate's setup file after the project's, the
// nonce for it, and the gate's reporter after the project's reporters (vitest's default
// when it names none).
const stash = globalThis[Symbol.for('assay.gate.vitest')];

export default async function assayGateConfig(env) {
  const { loadConfigFromFile, mergeConfig } = await import(stash.vite);
  const loaded = stash.project ? await loadConfigFromFile(env, stash.project, process.cwd()) : null;
  const config = mergeConfig(loaded ? loaded.config : {}, {
    test: { setupFiles: [stash.setup], provide: { assayGateTripwire: stash.nonce } },
  });
  const own = config.test.reporters;
  config.test.reporters = [...(own === undefined ? ['default'] : [].concat(own)), stash.reporter];
  return config;
}
