"""Gymnasium environments of vramgym. Importing this module registers them:

    import gymnasium as gym, vramgym.envs
    env = gym.make("vramgym/Synthesis-v0")                       # or gym.make("vramgym.envs:vramgym/Synthesis-v0")
    vec = gym.make_vec("vramgym/SynthesisBatch-v0", num_envs=1024, vectorization_mode="vector_entry_point")

| id | one step | reward |
| --- | --- | --- |
| vramgym/Synthesis-v0 | one token of the body, under an action mask | at the end: tests passed, bonus, costs |
| vramgym/SynthesisBatch-v0 | one whole body (an array of tokens) per env | the same, every step |
| vramgym/NeuralCompile-v0 | one byte of bytecode for a given source program | the paper's: +1 valid, +10 all pass, efficiency |
"""
from gymnasium.envs.registration import register, registry

_ENVS = {
    "vramgym/Synthesis-v0": ("vramgym.envs.synthesis:SynthesisEnv", "vramgym.envs.synthesis:SynthesisVectorEnv"),
    "vramgym/SynthesisBatch-v0": ("vramgym.envs.synthesis:make_batch_env", "vramgym.envs.synthesis:make_batch_vector_env"),
    "vramgym/NeuralCompile-v0": ("vramgym.envs.neural_compile:NeuralCompileEnv",
                                 "vramgym.envs.neural_compile:NeuralCompileVectorEnv"),
}

for _id, (_entry, _vector) in _ENVS.items():
    if _id not in registry:
        register(id=_id, entry_point=_entry, vector_entry_point=_vector)

ENV_IDS = tuple(_ENVS)
