// Types of idb.mjs: IndexedDB storage for the drivers in a browser.
import type { DeviceStore, KeptDeletes } from "./pkg-web/lembas_bindings.js";

export function idbStore(name?: string): Promise<DeviceStore & { close(): void }>;
export function idbKept(name?: string): Promise<KeptDeletes & { flushed(): Promise<void>; close(): void }>;
