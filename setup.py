"""pip installation of the ROS-free part (core, features, evaluation, robot simulation, bags, CLI).

On a ROS 2 install the package is built with colcon from CMakeLists.txt (rosidl needs CMake); colcon
ignores this file. `pip install .` gives users without ROS the library and the command-line tools.
"""
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent


def _requirements(name: str) -> list[str]:
    lines = (HERE / "requirements" / name).read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]


setup(
    name="cbcl_pr_ros",
    version="0.1.0",
    description="CBCL-PR few-shot lifelong object learning (core library and tools of cbcl_pr_ros)",
    license="Apache-2.0",
    python_requires=">=3.10",
    # cbcl_pr_ros.nodes is included (it only works on a ROS 2 install); the ROS-free tools need only
    # core, features, service, bags and cli.
    packages=find_packages(include=["cbcl_pr_ros", "cbcl_pr_ros.*"]),
    # config/ for every tool's defaults; msg/ and srv/ so that the bag tools (rosbags) can register
    # this package's message types without a ROS build (cbcl_pr_ros.share finds them there).
    data_files=[(f"share/cbcl_pr_ros/{sub}", sorted(str(p.relative_to(HERE)) for p in (HERE / sub).glob(pattern)))
                for sub, pattern in (("config", "*.*"), ("msg", "*.msg"), ("srv", "*.srv"))],
    install_requires=_requirements("core.txt"),
    extras_require={"test": _requirements("test.txt"), "page": _requirements("page.txt")},
    # the learned proposals' weights and their training log ship with the package (a few hundred kB)
    package_data={"cbcl_pr_ros": ["py.typed"], "cbcl_pr_ros.teaching_page": ["static/*"],
                  "cbcl_pr_ros.perception": ["weights/*"]},
    entry_points={"console_scripts": [
        "cbcl-bag-eval=cbcl_pr_ros.cli.bag_eval:main",
        "cbcl-bag-record=cbcl_pr_ros.cli.record:main",
        "cbcl-render-dataset=cbcl_pr_ros.cli.render_dataset:main",
        "cbcl-eval=cbcl_pr_ros.cli.evaluate:main",
        "cbcl-memory=cbcl_pr_ros.cli.memory:main",
    ]},
)
